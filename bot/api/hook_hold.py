"""The daemon's side of a hook: submit the request, hold it until it settles, withdraw it when the hook goes.

``POST /hooks/claude-code`` (and ``/hooks/codex``), which both the CLIs' HTTP hooks and `permission-bot hook`
call: a hook input in, the hook's JSON out. The reply is 200 with the decision (its ``Permission-Bot-Digest``
header names the digest of the record it is for, which `permission-bot hook` checks), or ``{}`` for none
(cancelled, or another door asks); a bad input is a 4xx, which the CLI also takes as no decision. A hook
that goes away before an answer (the terminal answered, the hook timed out, the process was killed: its
connection closes) withdraws its request: it is settled cancelled, the prompt is edited to say the hook
went away (:data:`GONE`), later answers get a notice. A request whose daemon went away is withdrawn by
``bot.service.hook_leases``: each daemon owns the hooks it holds (``requests.held_by``).

One front door per agent: under an SDK host (the ACP adapter) Claude Code asks the host and the
PermissionRequest hook at once. When a pending request of the same session with the same tool
input came by the agent's other door, the hook stands down: no decision, and its own request, if
already posted, is withdrawn. Standing down never allows anything. The other door must prove
itself: the ACP proxy claims the sessions it relays with its run's secret (``POST /sessions/claim``,
:mod:`bot.inbox.sessions`), and only a request carrying a key of that run, submitted by the token
that claimed, counts; a plain API submission under the hook's session id (a model that read an
agent token) never replaces the hook's request.

The claim: ``POST /sessions/claim`` ``{"sessionId": ID, "key": KEY}``, agent token; ``KEY`` is a key of the
proxy's form (``PROXYID:N``): its ``PROXYID`` is the run's secret, never shown by any route, and becomes the
session's proxy origin. 200 ``{"session_id": ID, "claimed": true}``; the same claim again is 200 too; 409
``session_claimed`` when another token's proxy claimed it or a hook asked in it first, 409
``session_in_other_room`` when it is another room's.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler

from bot.api.auth import Caller
from bot.api.common import DAEMON, Reach, error, json_body, route
from bot.events.kinds import Kind
from bot.hooks.models import CLIS, Cli, HookInput, HookInputError, parse_hook_input
from bot.hooks.output import decision, form_decision
from bot.hooks.translate import build_submissions, form_digest
from bot.inbox.db.errors import DATABASE_ERRORS
from bot.inbox.record import Record
from bot.inbox.session_rules import origin_of
from bot.inbox.sessions import HOOK_KEY_PREFIX, SessionClaimed, SessionInOtherRoom, claim, proxy_of
from bot.inbox.submission import SubmissionError
from bot.service.hook_leases import withdrawn_by
from bot.util.digest import HEADER
from bot.util.ids import SAFE_ID_RULE, is_safe_id

if TYPE_CHECKING:
    from bot.service.daemon import Daemon

log = structlog.get_logger("hooks")
api_log = structlog.get_logger("api")

TICK = 1.0  # how often a held request looks for its hook's connection and a twin


GONE = "withdrawn: the hook went away (its CLI stopped, answered in its terminal or timed out)"
"""Why a request whose hook stopped waiting was cancelled: nobody answered it here."""
TWIN = "withdrawn: the same request came through ACP, whose prompt decides"
FORM_OVER = "withdrawn: another question of the same form was declined or withdrawn"


async def _twin(daemon: Daemon, inp: HookInput, room: str = "default") -> Record | None:
    """A pending request of the same session and tool input that came by the agent's other door: the
    ACP proxy run that claimed the session (a key of its run, its token), into the same room."""
    if inp.hook_event_name != "PermissionRequest":
        return None
    proxy = await proxy_of(daemon.inbox.database, inp.session_id)
    if proxy is None:  # no proxy relays this session: no other door, whatever was submitted under its id
        return None
    pending = await daemon.inbox.pending_of_session(inp.session_id, room=room)  # that session's only
    return next((rec for rec in pending if rec.session_id == inp.session_id and origin_of(rec.key) == proxy.origin
                 and rec.submitted_by == proxy.token and rec.raw_input == inp.tool_input), None)


async def hold(
    daemon: Daemon, cli: Cli, data: Any, gone: Callable[[], bool], submitted_by: str | None = None
) -> tuple[dict[str, Any] | None, str | None]:
    """Ask the room for one hook input (posted with the API token ``submitted_by``); the hook's
    JSON output (or None for "no decision") and the digest of the record it is for (the hook checks it).

    Raises HookInputError for an input we will not act on and SubmissionError for one the
    inbox refuses. ``gone()`` says whether the hook stopped waiting.
    """
    inp = parse_hook_input(cli, data)
    room = daemon.cfg.room_of_token(submitted_by)
    if (twin := await _twin(daemon, inp, room)) is not None:
        log.info("hook_defers_to_other_door", request_id=twin.id, session_id=inp.session_id)
        return None, None
    bodies = build_submissions(cli, inp, key=HOOK_KEY_PREFIX + secrets.token_hex(16))
    recs: list[Record] = []
    try:
        for body in bodies:  # a question form: one request per question, in the agent's order
            recs.append((await daemon.submit(body, submitted_by=submitted_by, held=True))[0])  # this daemon holds it
        while any(r.pending for r in recs) and not any(_gave_up(r) for r in recs):
            try:
                why = GONE if gone() else TWIN if await _twin(daemon, inp, room) is not None else None
                if why is not None:
                    await _withdraw_all(daemon, recs, cli, why)
                    return None, None
                waiting = next(r for r in recs if r.pending)
                settled = await daemon.inbox.wait_settled(waiting.id, TICK) or waiting
                recs = [settled if r.id == settled.id else await _now(daemon, r) for r in recs]
            except DATABASE_ERRORS as e:  # the database away: the hook keeps its place (its retry would ask twice)
                log.warning("hook_hold_state_unavailable", request_id=recs[0].id, error=str(e)[:300])
                await asyncio.sleep(TICK)
    except asyncio.CancelledError:
        await asyncio.shield(_withdraw_all(daemon, recs, cli, GONE))
        raise
    digest = form_digest([r.digest for r in recs])
    if len(bodies) > 1 or recs[0].kind == Kind.QUESTION:
        if any(r.pending for r in recs):  # one was declined or withdrawn: the form is over
            await _withdraw_all(daemon, recs, cli, FORM_OVER)
        return form_decision(inp, [r.to_api() for r in recs]), digest
    return decision(cli, inp, recs[0].to_api()), digest


async def _now(daemon: Daemon, rec: Record) -> Record:
    """``rec`` as the inbox has it now (another question of the form may have been answered meanwhile)."""
    return (await daemon.inbox.get(rec.id) or rec) if rec.pending else rec


def _gave_up(rec: Record) -> bool:
    """A question of a form that will not be answered: declined, expired or cancelled."""
    return not rec.pending and (rec.outcome is None or not rec.outcome.answers)


async def _withdraw_all(daemon: Daemon, recs: list[Record], cli: Cli, why: str) -> None:
    """Cancel the requests of ``recs`` still pending, as withdrawn by ``cli``'s hook for ``why``."""
    from bot.service.daemon import NotFound

    by = withdrawn_by(cli)
    for rec in (r for r in recs if r.pending):
        try:
            await daemon.decide(rec.id, "cancel", by=by, feedback=why)
        except NotFound:
            continue
        log.info("hook_request_withdrawn", request_id=rec.id, by=by, why=why)


def _gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


def _route(cli: Cli) -> Handler:
    @route("submit")  # an agent token, as for POST /permissions
    async def handle(request: web.Request, who: Caller, _: Reach) -> web.StreamResponse:
        data = await json_body(request)
        try:
            out, digest = await hold(request.app[DAEMON], cli, data, lambda: _gone(request), submitted_by=who.name)
        except HookInputError as e:
            return error(422, "invalid_hook_input", str(e))
        return web.json_response(out or {}, headers={HEADER: digest} if out and digest else None)

    return handle


@route("submit")
async def claim_session(request: web.Request, who: Caller, _: Reach) -> web.Response:
    body = await json_body(request, obj=True)
    sid, key = body.get("sessionId"), body.get("key")
    if not isinstance(sid, str) or not is_safe_id(sid):
        raise SubmissionError(f"sessionId: must be {SAFE_ID_RULE}")
    origin = origin_of(key)
    if origin is None:
        raise SubmissionError("key: expected a key the proxy set (PROXYID:N)")
    daemon = request.app[DAEMON]
    daemon.harnesses.refuse_reserved(sid)
    room = daemon.cfg.room_of_token(who.name)  # the caller's room, by its credential only
    try:
        async with daemon.inbox.database.transaction() as db:
            await claim(db, sid, room, origin, who.name)
    except (SessionClaimed, SessionInOtherRoom) as e:  # answered 409 by the app's error middleware
        api_log.warning("session_claim_refused", session_id=sid, token=who.name, reason=str(e))
        raise
    api_log.info("session_claimed", session_id=sid, token=who.name, room=room)
    return web.json_response({"session_id": sid, "claimed": True})


def add_hook_routes(app: web.Application) -> None:
    """Register the hook routes, and the other door's claim, on ``app``."""
    for cli in CLIS:
        app.router.add_post(f"/hooks/{cli}", _route(cli))
    app.router.add_post("/sessions/claim", claim_session)

    async def orphans(app: web.Application) -> None:  # before the first hook: bot.service.hook_leases
        await app[DAEMON].leases.start()

    app.on_startup.append(orphans)
