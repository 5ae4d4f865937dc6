"""``/rules``: the session rules ("Allow for this session"): list, revoke one, end a session's.

Listing needs any valid token (a rule's ``origin``, the proxy run's secret, is never shown),
revoking a decider token, ending a session's rules an agent token that shows the ``key`` of a
request it submitted (the proxy ends its own sessions, never another run's). Each route sees and
touches only the rules of its caller's rooms (a rule is in the room of the request it was set on):
another room's rule is absent from the list, and 404 to revoke or end.
"""

from __future__ import annotations

from aiohttp import web

from bot.api.auth import Caller
from bot.api.common import DAEMON, Reach, error, json_body, route
from bot.inbox.session_rules import origin_of
from bot.inbox.submission import SubmissionError

MAX_ID = 255


@route("read")
async def list_rules(request: web.Request, _: Caller, reach: Reach) -> web.Response:
    """``GET /rules[?session=ID]``: ``{"rules": [...]}``, oldest first."""
    session = request.query.get("session") or None
    rules = await request.app[DAEMON].session_rules.list(session, reach.rooms)
    return web.json_response({"rules": [r.to_api() for r in rules]})


@route("decide")
async def revoke_rule(request: web.Request, _: Caller, reach: Reach) -> web.Response:
    """``DELETE /rules/{id}``: the rule revoked, or 404."""
    raw = request.match_info["id"]
    known = raw.isascii() and raw.isdigit() and len(raw) < 19
    rule = await request.app[DAEMON].session_rules.revoke(int(raw), reach.rooms) if known else None
    if rule is None:
        return error(404, "not_found", f"no session rule {raw[:80]!r}")
    return web.json_response({"revoked": rule.to_api()})


@route("submit")
async def end_session(request: web.Request, who: Caller, reach: Reach) -> web.Response:
    """``POST /rules/end`` ``{"key": KEY, "sessionId"?: ID}``: a proxy's session (or all of its sessions)
    ended. ``key`` is the key of a request this token submitted (of that session, when one is named):
    the proof that the run is the caller's; 404 otherwise. The answer says how many rules were dropped."""
    body = await json_body(request, obj=True)
    key = body.get("key")
    if not isinstance(key, str) or origin_of(key) is None:
        raise SubmissionError("key: expected a key the proxy set (PROXYID:N)")
    sid = body.get("sessionId")
    if sid is not None and (not isinstance(sid, str) or not sid or len(sid) > MAX_ID):
        raise SubmissionError(f"sessionId: expected a string of 1 to {MAX_ID} characters")
    n = await request.app[DAEMON].session_rules.end_by_key(key, who.name, sid, reach.rooms)
    if n is None:
        return error(404, "not_found", "no request of this token used that key")
    return web.json_response({"ended": n})
