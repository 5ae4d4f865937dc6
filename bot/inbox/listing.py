"""The inbox part that lists pending records: all of them, or a page by the keyset cursor of
``bot/inbox/pages.py`` (over the ``requests_state`` index), as records or as the API's JSON array."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from bot.inbox.base import InboxBase, row_to_record
from bot.inbox.pages import Key
from bot.inbox.record import PENDING, Record


def _where(
    session: str | None, room: str | None, first: int, rooms: Collection[str] | None = None
) -> tuple[str, tuple[Any, ...]]:
    """The filters as SQL (`` AND ...``, placeholders numbered from ``$first``) and their arguments;
    ``rooms``: only these rooms (the caller's; None: every room)."""
    where: str = ""
    args: tuple[Any, ...] = ()
    if session is not None:
        where, args = f" AND (session_id=${first} OR label=${first})", (session,)
    if room is not None:
        where, args = f"{where} AND room=${first + len(args)}", (*args, room)
    if rooms is not None:
        names = sorted(rooms)
        marks = ",".join(f"${first + len(args) + i}" for i in range(len(names)))
        where, args = (f"{where} AND room IN ({marks})" if names else f"{where} AND 1=0"), (*args, *names)
    return where, args


class Listing(InboxBase):
    """Pending records, oldest first."""

    async def pending(
        self, session: str | None = None, room: str | None = None, rooms: Collection[str] | None = None
    ) -> list[Record]:
        """Pending records, oldest first; ``session`` matches the id or the label; ``room`` the station room;
        ``rooms`` limits them to those rooms."""
        where, args = _where(session, room, 2, rooms)
        return await self._records(
            f"SELECT * FROM requests WHERE state=$1{where} ORDER BY requested_at, rowid", PENDING, *args
        )

    async def pending_page(
        self, limit: int, after: Key | None = None, session: str | None = None, room: str | None = None
    ) -> tuple[list[Record], Key | None]:
        """Up to ``limit`` pending records after the key ``after`` (oldest first) and the key to continue
        from (None on the last page): a keyset query over the ``requests_state`` index (bot/inbox/pages.py)."""
        rows, nxt = await self._pending_rows(limit, after, session, room)
        return [row_to_record(r) for r in rows], nxt

    async def pending_json(
        self, limit: int | None = None, after: Key | None = None, session: str | None = None,
        room: str | None = None, rooms: Collection[str] | None = None,
    ) -> tuple[bytes, Key | None]:
        """As ``pending_page`` (all of them without ``limit``; only ``rooms``, when given), as the API's JSON
        array: each record's JSON is kept while its row is unchanged, so a listing encodes only what changed."""
        rows, nxt = await self._pending_rows(limit, after, session, room, rooms)
        return self._json.array(rows, lambda r: json.dumps(row_to_record(r).to_api())), nxt  # ASCII, as before

    async def _pending_rows(
        self, limit: int | None, after: Key | None, session: str | None, room: str | None = None,
        rooms: Collection[str] | None = None,
    ) -> tuple[list[Any], Key | None]:
        at, rowid = after if after is not None else (float("-inf"), -1)
        filters, more = _where(session, room, 4, rooms)
        where = "state=$1 AND (requested_at, rowid) > ($2, $3)" + filters
        args: tuple[Any, ...] = (PENDING, float(at), int(rowid), *more)
        sql = f"SELECT rowid AS _key, * FROM requests WHERE {where} ORDER BY requested_at, rowid"
        if limit is not None:  # no LIMIT at all without one (LIMIT -1 is an error on PostgreSQL)
            sql, args = sql + f" LIMIT ${len(args) + 1}", (*args, limit + 1)
        rows = list(await self.database.fetch(sql, *args))
        if limit is None or len(rows) <= limit:
            return rows, None
        rows = rows[:limit]
        return rows, (float(rows[-1]["requested_at"]), int(rows[-1]["_key"]))
