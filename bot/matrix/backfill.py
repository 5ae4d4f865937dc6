"""A limited timeline's gap, fetched back page by page (``/messages``) to our last sync."""

from __future__ import annotations

from functools import partial
from typing import Any

from nio import MessageDirection, RoomMessagesResponse

from bot.matrix.retry import retry
from bot.matrix.station import Station


class BackfillFailed(Exception):
    """The homeserver refused a /messages page: the batch is handled again later."""


async def backfill(st: Station, start: str, until: str) -> list[Any]:
    """Events between ``until`` (our last sync) and ``start`` (the gap's end), oldest first."""
    out: list[Any] = []
    token = start
    for _ in range(200):  # at most 20,000 events back
        page = partial(st.client.room_messages, st.room_id, start=token, end=until, direction=MessageDirection.back,
                       limit=100)
        r = await retry("backfill", page, attempts=5)
        if not isinstance(r, RoomMessagesResponse):  # the batch fails and comes again
            raise BackfillFailed(f"{getattr(r, 'status_code', '')}: {getattr(r, 'message', r)}")
        out.extend(r.chunk)
        if not r.chunk or not r.end or r.end == token:
            break
        token = r.end
    out.reverse()
    return out
