"""``/rules``: the session rules ("Allow for this session"): list, revoke one, end a session's.

Listing needs any valid token (a rule's ``origin``, the proxy run's secret, is never shown),
revoking a decider token, ending a session's rules an agent token that shows the ``key`` of a
request it submitted (the proxy ends its own sessions, never another run's). Each route sees and
touches only the rules of its caller's rooms (a rule is in the room of the request it was set on):
another room's rule is absent from the list, and 404 to revoke or end.
"""

from __future__ import annotations

from aiohttp import web

from bot.api.common import DAEMON, error, json_body, scoped
from bot.inbox.session_rules import origin_of
from bot.inbox.submission import SubmissionError

MAX_ID = 255


async def list_rules(request: web.Request) -> web.Response:
    """``GET /rules[?session=ID]``: ``{"rules": [...]}``, oldest first."""
    if isinstance(got := scoped(request, "read"), web.Response):
        return got
    session = request.query.get("session") or None
    rules = await request.app[DAEMON].session_rules.list(session, got[1].rooms)
    return web.json_response({"rules": [r.to_api() for r in rules]})


async def revoke_rule(request: web.Request) -> web.Response:
    """``DELETE /rules/{id}``: the rule revoked, or 404."""
    if isinstance(got := scoped(request, "decide"), web.Response):
        return got
    raw = request.match_info["id"]
    known = raw.isascii() and raw.isdigit() and len(raw) < 19
    rule = await request.app[DAEMON].session_rules.revoke(int(raw), got[1].rooms) if known else None
    if rule is None:
        return error(404, "not_found", f"no session rule {raw[:80]!r}")
    return web.json_response({"revoked": rule.to_api()})


async def end_session(request: web.Request) -> web.Response:
    """``POST /rules/end`` ``{"key": KEY, "sessionId"?: ID}``: a proxy's session (or all of its sessions)
    ended. ``key`` is the key of a request this token submitted (of that session, when one is named):
    the proof that the run is the caller's; 404 otherwise. The answer says how many rules were dropped."""
    if isinstance(got := scoped(request, "submit"), web.Response):
        return got
    who, reach = got
    body = await json_body(request)
    if not isinstance(body, dict):
        raise SubmissionError("body: expected a JSON object")
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


def add_rule_routes(app: web.Application) -> None:
    """Register the ``/rules`` routes on ``app``."""
    app.router.add_get("/rules", list_rules)
    app.router.add_post("/rules/end", end_session)
    app.router.add_delete("/rules/{id}", revoke_rule)
