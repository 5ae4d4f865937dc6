"""``POST /sessions/claim``: an ACP proxy claims a session it relays, so that only its own requests may
stand in for a request a hook holds in that session (the agent's other door; see :mod:`bot.api.hook_hold`).

Body ``{"sessionId": ID, "key": KEY}``, agent token; ``KEY`` is a key of the proxy's form
(``PROXYID:N``): its ``PROXYID`` is the run's secret, never shown by any route, and becomes the
session's proxy origin. 200 ``{"session_id": ID, "claimed": true}``; the same claim again is 200 too;
409 ``session_claimed`` when another token's proxy claimed it or a hook asked in it first, 409
``session_in_other_room`` when it is another room's (:mod:`bot.inbox.sessions`).
"""

from __future__ import annotations

import structlog
from aiohttp import web

from bot.api.common import DAEMON, json_body, scoped
from bot.inbox.session_rules import origin_of
from bot.inbox.sessions import SessionClaimed, SessionInOtherRoom, claim
from bot.inbox.submission import SubmissionError
from bot.util.ids import SAFE_ID_RULE, is_safe_id

log = structlog.get_logger("api")


async def claim_session(request: web.Request) -> web.Response:
    if isinstance(got := scoped(request, "submit"), web.Response):
        return got
    who = got[0]
    body = await json_body(request)
    if not isinstance(body, dict):
        raise SubmissionError("body: expected a JSON object")
    sid, key = body.get("sessionId"), body.get("key")
    if not isinstance(sid, str) or not is_safe_id(sid):
        raise SubmissionError(f"sessionId: must be {SAFE_ID_RULE}")
    origin = origin_of(key)
    if origin is None:
        raise SubmissionError("key: expected a key the proxy set (PROXYID:N)")
    daemon = request.app[DAEMON]
    daemon.harnesses.refuse_reserved(sid)
    room = daemon.rooms.room_of_token(who.name)  # the caller's room, by its credential only
    try:
        async with daemon.inbox.transaction() as db:
            await claim(db, sid, room, origin, who.name)
    except (SessionClaimed, SessionInOtherRoom) as e:  # answered 409 by the app's error middleware
        log.warning("session_claim_refused", session_id=sid, token=who.name, reason=str(e))
        raise
    log.info("session_claimed", session_id=sid, token=who.name, room=room)
    return web.json_response({"session_id": sid, "claimed": True})


def add_session_routes(app: web.Application) -> None:
    """Register ``POST /sessions/claim`` on ``app``."""
    app.router.add_post("/sessions/claim", claim_session)
