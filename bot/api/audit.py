"""``GET /audit[?since=&room=]``: the ledger's entries as JSON lines, streamed (bot.inbox.ledger).

A decider token only; it sees its rooms' entries only (``[[api.tokens]] rooms``; another room, or one not
configured: 404, as if it did not exist). ``since``: ISO 8601 or an age (``2h``, ``7d``).
"""

from __future__ import annotations

import time

from aiohttp import web

from bot.api.auth import Caller, may
from bot.api.common import DAEMON, Reach, error, route
from bot.inbox import ledger
from bot.util.durations import parse_since

CONTENT_TYPE = "application/jsonl"
BATCH = 200


@route("read")
async def audit(request: web.Request, who: Caller, reach: Reach) -> web.StreamResponse:
    if may(who, "decide") is not None:
        return error(403, "forbidden", f"token {who.name!r} has no decider role; the ledger needs one")
    daemon = request.app[DAEMON]
    since = request.query.get("since")
    try:
        at = None if since is None else parse_since(since, time.time())
    except ValueError as e:
        return error(400, "bad_since", str(e))
    known = set(daemon.cfg.room_names)
    scope = reach.rooms  # the one rule every read route goes through (bot.api.common)
    mine = known if scope is None else known & set(scope)
    room = request.query.get("room")
    if room is not None and room not in mine:
        return error(404, "not_found", "no such room")
    rooms = [room] if room is not None else (None if scope is None else sorted(mine))
    resp = web.StreamResponse(headers={"Content-Type": CONTENT_TYPE, "Cache-Control": "no-store"})
    await resp.prepare(request)
    chunk: list[str] = []
    async for text in ledger.lines(daemon.inbox.database, since=at, rooms=rooms):
        chunk.append(text)
        if len(chunk) >= BATCH:
            await resp.write(("\n".join(chunk) + "\n").encode())
            chunk.clear()
    if chunk:
        await resp.write(("\n".join(chunk) + "\n").encode())
    await resp.write_eof()
    return resp
