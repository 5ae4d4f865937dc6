"""The HTTP API (aiohttp): submit, list, get with long-poll, decide, SSE, health, metrics.

Every route but /healthz and /metrics needs a bearer token, and each action a role
(see :mod:`bot.api.auth`); with no token configured they all answer 401 (fail closed).
Bad bodies get a 4xx with a reason, never a 500; a body that does not arrive whole within
``BODY_TIMEOUT`` gets ``408``. Load limits: :mod:`bot.api.limits`.
"""

from __future__ import annotations

import asyncio
import hmac
from typing import TYPE_CHECKING, Any

import structlog
from aiohttp import web

from bot.api import rules
from bot.api.audit import audit
from bot.api.auth import DECIDER, Caller, Tokens, may
from bot.api.common import DAEMON, LIMITS, TOKENS, Reach, error, json_body, refuse, route
from bot.api.events import EVENTS, EventLog, stream
from bot.api.hook_hold import add_hook_routes
from bot.api.limits import RETRY_AFTER, BodyTimeout, Busy, Limits, budget, busy, counted
from bot.events._util import unicode_problem
from bot.inbox import pages
from bot.inbox.db.errors import DATABASE_ERRORS
from bot.inbox.decisions import NoFittingOption
from bot.inbox.quorum import NotCounted
from bot.inbox.record import Record
from bot.inbox.sessions import SessionClaimed, SessionInOtherRoom, TooManyPending
from bot.inbox.submission import KeyConflict, SubmissionError
from bot.room.posts import TooLarge
from bot.service.metrics import CONTENT_TYPE

if TYPE_CHECKING:
    from bot.service.daemon import Daemon

log = structlog.get_logger("api")

MAX_BODY = 2 * 1024 * 1024
MAX_WAIT = 300.0


@web.middleware
async def _errors(request: web.Request, handler: Any) -> web.StreamResponse:
    try:
        resp: web.StreamResponse = await handler(request)
        return resp
    except web.HTTPException as e:
        if e.status == 413:
            return error(413, "too_large", f"body larger than {MAX_BODY} bytes")
        if e.status >= 400 and e.content_type != "application/json":
            return error(e.status, e.reason.lower().replace(" ", "_"), e.reason)
        raise
    except TooLarge as e:
        return error(422, "too_large", str(e))
    except BodyTimeout as e:
        resp = error(408, "body_timeout", str(e))
        resp.force_close()
        return resp
    except SubmissionError as e:
        return error(422, "invalid_request", str(e))
    except (SessionInOtherRoom, SessionClaimed) as e:
        code = "session_in_other_room" if isinstance(e, SessionInOtherRoom) else "session_claimed"
        return error(409, code, str(e))
    except Busy as e:
        return busy(str(e))
    except TooManyPending as e:
        resp = error(429, "too_many_pending", str(e))
        resp.headers["Retry-After"] = str(RETRY_AFTER)
        return resp
    except (asyncio.CancelledError, ConnectionResetError):
        raise
    except DATABASE_ERRORS as e:  # the state's disk is full or read-only, its database unreachable: nothing stored
        known = request.app[DAEMON].inbox.database.unreachable is not None  # an outage already said: not news
        (log.warning if known else log.error)("api_storage_failed", path=request.path,
                                              error=f"{type(e).__name__}: {e}"[:300])
        return busy("the daemon cannot read or write its state right now (its database unreachable, "
                    "or the disk full or read-only); retry later")
    except Exception:
        log.exception("api_handler_failed", path=request.path)
        return error(500, "internal", "internal error; see the daemon's log")


@route("submit")
async def submit(request: web.Request, who: Caller, _: Reach) -> web.Response:
    body = await json_body(request)
    try:
        rec, created = await request.app[DAEMON].submit(body, submitted_by=who.name)
    except SessionInOtherRoom:
        log.warning("api_session_in_other_room", token=who.name)
        raise
    except KeyConflict as e:
        log.warning("api_key_conflict", token=who.name, reason=str(e))
        return error(409, "key_conflict", str(e))
    return web.json_response(rec.to_api(), status=201 if created else 200)


@route("read")
async def list_pending(request: web.Request, _who: Caller, reach: Reach) -> web.Response:
    """Pending requests, oldest first: all of them, or a page (``limit``, ``cursor``) with a ``Link`` to the next."""
    session = request.query.get("session") or None
    room = request.query.get("room") or None  # a room's name: only its requests
    inbox = request.app[DAEMON].inbox
    limit_s, cursor = request.query.get("limit"), request.query.get("cursor")
    view = request.query.get("view")  # "brief": pages of records cut to what `permissions ls` prints
    if view not in (None, "brief"):
        return error(422, "invalid_request", "view: expected brief (or none)")
    if limit_s is None and cursor is None and view is None:  # the unpaged list, as before pagination
        body, _ = await inbox.pending_json(session=session, room=room, rooms=reach.rooms)  # another room's: absent
        return web.Response(body=body, content_type="application/json")
    try:
        limit = pages.parse_limit(limit_s) if limit_s is not None else pages.DEFAULT_LIMIT
        after = pages.decode(cursor) if cursor else None
    except ValueError as e:
        return error(422, "invalid_request", str(e))
    page = inbox.pending_brief_json if view else inbox.pending_json
    body, nxt = await page(limit, after, session, room, reach.rooms)
    resp = web.Response(body=body, content_type="application/json")
    if nxt is not None:
        url = request.rel_url.update_query(limit=str(limit), cursor=pages.encode(nxt))
        resp.headers["Link"] = f'<{url}>; rel="next"'
    return resp


@route("read")
async def get_one(request: web.Request, _: Caller, reach: Reach) -> web.Response:
    rid = request.match_info["id"]
    wait_s = request.query.get("wait")
    inbox = request.app[DAEMON].inbox
    rec: Record | None = await inbox.get(rid)
    if rec is None or not reach.sees(rec.room):  # another room's request is unknown to this caller
        return error(404, "not_found", f"no request {rid!r}")
    if wait_s is not None:
        try:
            wait = float(wait_s)
        except ValueError:
            return error(422, "invalid_request", "wait: expected a number of seconds")
        if not 0 <= wait <= MAX_WAIT or wait != wait:
            return error(422, "invalid_request", f"wait: between 0 and {MAX_WAIT:g} seconds")
        with request.app[LIMITS].long_poll(wait > 0 and not counted(request)):  # an agent's: its budget
            rec = await inbox.wait_settled(rid, wait)
    if rec is None:
        return error(404, "not_found", f"no request {rid!r}")
    return web.json_response(rec.to_api())


def _opt_str(body: dict[str, Any], key: str, max_len: int) -> str | None:
    v = body.get(key)
    if v is None:
        return None
    if not isinstance(v, str):
        raise SubmissionError(f"{key}: expected a string")
    if len(v) > max_len:
        raise SubmissionError(f"{key}: at most {max_len} characters")
    if unicode_problem(v) is not None:
        raise SubmissionError(f"{key}: not valid Unicode (a lone surrogate)")
    return v


def _same_key(given: str | None, stored: str | None) -> bool:
    """Whether an agent's cancel carries the key its request was submitted with (constant time)."""
    if given is None or stored is None:
        return False
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), stored.encode("utf-8", "surrogatepass"))


@route("read")  # any valid token; which may decide or cancel is checked below
async def decide(request: web.Request, who: Caller, reach: Reach) -> web.Response:
    """``POST /permissions/{id}``: a decider's decision, or a cancel. An agent token cancels only a
    request it submitted and whose ``key`` (the proxy's secret) it sends; else 404, as for an unknown id."""
    from bot.service.daemon import NotFound

    rid = request.match_info["id"]
    body = await json_body(request, obj=True)
    decision = body.get("decision")
    if decision not in ("approve", "deny", "cancel", "answer"):
        raise SubmissionError('decision: expected "approve", "deny", "cancel" or "answer"')
    scope = body.get("scope")
    if scope not in (None, "once", "always"):
        raise SubmissionError('scope: expected "once" or "always"')
    if body.get("via", "api") not in ("api", "rule"):  # accepted from old clients, never trusted: set here
        raise SubmissionError('via: expected "api" or "rule"')
    option_id = _opt_str(body, "option_id", 200)
    feedback = _opt_str(body, "feedback", 4000)
    answer = _opt_str(body, "answer", 4000)  # a question's (decision "answer"): a number, label(s) or free text
    _opt_str(body, "by", 200)  # accepted from old clients, never trusted: the token names the decider
    key = _opt_str(body, "key", 255)
    if decision == "cancel":
        rec0 = await request.app[DAEMON].inbox.get(rid)
        if rec0 is None or not (DECIDER in who.roles or _same_key(key, rec0.key)):
            return error(404, "not_found", f"no pending request {rid!r} (unknown or already resolved)")
        denied = may(who, "cancel", rec0.submitted_by)
    else:
        denied = may(who, "decide")
    if denied is not None:
        log.warning("api_decision_refused", request_id=rid, token=who.name, decision=decision)
        return refuse(denied)
    try:
        rec = await request.app[DAEMON].decide(
            rid, decision, option_id=option_id, scope=scope, feedback=feedback, by=who.answered_by,
            rooms=reach.rooms,  # a caller's other rooms' requests are unknown to it
            answer=answer, person=who.user,  # a quorum counts the token's person, never the token
        )
    except NotCounted as e:
        log.warning("api_approval_not_counted", request_id=rid, token=who.name, reason=str(e))
        return error(403, "not_counted", str(e))
    except NotFound:
        return error(404, "not_found", f"no pending request {rid!r} (unknown or already resolved)")
    except NoFittingOption as e:
        return error(409, "no_fitting_option", str(e))
    return web.json_response(rec.to_api())


@route("read")
async def events(request: web.Request, _: Caller, reach: Reach) -> web.StreamResponse:
    """GET /events (bot/api/events.py), holding a long-poll slot (an agent's: its budget's) while it streams;
    it tells only the caller's rooms' requests."""
    with request.app[LIMITS].long_poll(not counted(request)):  # an agent's stream: its token's budget
        return await stream(request, reach)


async def healthz(request: web.Request) -> web.Response:
    return web.json_response(request.app[DAEMON].health())


@route("read")  # any valid token: it only wakes a poll
async def harness_event(request: web.Request, _: Caller, __: Reach) -> web.Response:
    """A watched harness's event (e.g. its per-session webhook): only a hint to poll it now, body unread."""
    if not request.app[DAEMON].harnesses.wake(request.match_info["name"]):
        return error(404, "not_found", "no watched harness by that name")
    return web.json_response({"ok": True}, status=202)


async def metrics(request: web.Request) -> web.Response:
    body = await request.app[DAEMON].metrics.render()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


def create_app(daemon: Daemon, tokens: Tokens) -> web.Application:
    """The aiohttp application over ``daemon``, open to the callers ``tokens`` names, with its own load
    :class:`Limits` (serve it with ``LimitedRunner``)."""
    limits = Limits()
    app = web.Application(client_max_size=MAX_BODY, middlewares=[budget(tokens, limits), _errors])
    app[DAEMON] = daemon
    app[LIMITS] = limits
    app[TOKENS] = tokens
    app[EVENTS] = EventLog()
    daemon.inbox.listen(app[EVENTS].on_change, every_daemon=True)  # /events tells every daemon's changes
    app.router.add_post("/permissions", submit)
    app.router.add_get("/permissions", list_pending)
    app.router.add_get("/permissions/{id}", get_one)
    app.router.add_post("/permissions/{id}", decide)
    app.router.add_get("/events", events)
    app.router.add_get("/healthz", healthz)
    app.router.add_post("/harnesses/{name}/events", harness_event)
    app.router.add_get("/metrics", metrics)
    add_hook_routes(app)
    app.router.add_get("/rules", rules.list_rules)
    app.router.add_post("/rules/end", rules.end_session)
    app.router.add_delete("/rules/{id}", rules.revoke_rule)
    app.router.add_get("/audit", audit)
    return app
