"""The daemon's side of a hook: submit the request, hold it until it settles, withdraw it when the hook goes.

Used by ``POST /hooks/claude-code`` (and ``/hooks/codex``), which both the CLIs' HTTP hooks and
`permission-bot hook` call. A hook that goes away before an answer (the terminal answered, the
hook timed out, the process was killed: its connection closes) withdraws its request: it is
settled cancelled, the prompt is edited to say the hook went away (:data:`GONE`), later answers
get a notice. A request whose daemon went away is withdrawn by ``bot.service.hook_leases``: each
daemon owns the hooks it holds (``requests.held_by``).

One front door per agent: under an SDK host (the ACP adapter) Claude Code asks the host and the
PermissionRequest hook at once. When a pending request of the same session with the same tool
input came by the agent's other door, the hook stands down: no decision, and its own request, if
already posted, is withdrawn. Standing down never allows anything. The other door must prove
itself: the ACP proxy claims the sessions it relays with its run's secret (``POST /sessions/claim``,
:mod:`bot.inbox.sessions`), and only a request carrying a key of that run, submitted by the token
that claimed, counts; a plain API submission under the hook's session id (a model that read an
agent token) never replaces the hook's request.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog

from bot.events.kinds import Kind
from bot.events.states import Via
from bot.hooks.models import Cli, HookInput, parse_hook_input
from bot.hooks.output import decision, form_decision
from bot.hooks.translate import build_submissions, form_digest
from bot.inbox.db.errors import DATABASE_ERRORS
from bot.inbox.record import Record
from bot.inbox.session_rules import origin_of
from bot.inbox.sessions import HOOK_KEY_PREFIX, proxy_of
from bot.service.hook_leases import withdrawn_by

if TYPE_CHECKING:
    from bot.service.daemon import Daemon

log = structlog.get_logger("hooks")

KEY_PREFIX = HOOK_KEY_PREFIX
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
    proxy = await proxy_of(daemon.inbox.db, inp.session_id)
    if proxy is None:  # no proxy relays this session: no other door, whatever was submitted under its id
        return None
    for rec in await daemon.inbox.pending_of_session(inp.session_id, room=room):  # that session's only
        if (
            rec.session_id == inp.session_id
            and origin_of(rec.key) == proxy.origin
            and rec.submitted_by == proxy.token
            and rec.raw_input == inp.tool_input
        ):
            return rec
    return None


async def _withdraw(daemon: Daemon, rec: Record, by: str, why: str) -> None:
    from bot.service.daemon import NotFound

    try:
        await daemon.decide(rec.id, "cancel", by=by, via=Via.CANCEL, feedback=why)
    except NotFound:
        return
    log.info("hook_request_withdrawn", request_id=rec.id, by=by, why=why)


async def hold(
    daemon: Daemon, cli: Cli, data: Any, gone: Callable[[], bool], submitted_by: str | None = None
) -> tuple[dict[str, Any] | None, str | None]:
    """Ask the room for one hook input (posted with the API token ``submitted_by``); the hook's
    JSON output (or None for "no decision") and the digest of the record it is for (the hook checks it).

    Raises HookInputError for an input we will not act on and SubmissionError for one the
    inbox refuses. ``gone()`` says whether the hook stopped waiting.
    """
    inp = parse_hook_input(cli, data)
    room = daemon.rooms.room_of_token(submitted_by)
    if (twin := await _twin(daemon, inp, room)) is not None:
        log.info("hook_defers_to_other_door", request_id=twin.id, session_id=inp.session_id)
        return None, None
    bodies = build_submissions(cli, inp, key=KEY_PREFIX + secrets.token_hex(16))
    recs: list[Record] = []
    try:
        for body in bodies:  # a question form: one request per question, in the agent's order
            recs.append((await daemon.submit(body, submitted_by=submitted_by, held=True))[0])  # this daemon holds it
        while any(r.pending for r in recs) and not any(_gave_up(r) for r in recs):
            try:
                if gone():
                    await _withdraw_all(daemon, recs, withdrawn_by(cli), GONE)
                    return None, None
                if await _twin(daemon, inp, room) is not None:
                    await _withdraw_all(daemon, recs, withdrawn_by(cli), TWIN)
                    return None, None
                waiting = next(r for r in recs if r.pending)
                settled = await daemon.inbox.wait_settled(waiting.id, TICK) or waiting
                recs = [settled if r.id == settled.id else await _now(daemon, r) for r in recs]
            except DATABASE_ERRORS as e:  # the database away: the hook keeps its place (its retry would ask twice)
                log.warning("hook_hold_state_unavailable", request_id=recs[0].id, error=str(e)[:300])
                await asyncio.sleep(TICK)
    except asyncio.CancelledError:
        await asyncio.shield(_withdraw_all(daemon, recs, withdrawn_by(cli), GONE))
        raise
    digest = form_digest([r.digest for r in recs])
    if len(bodies) > 1 or recs[0].kind == Kind.QUESTION:
        if any(r.pending for r in recs):  # one was declined or withdrawn: the form is over
            await _withdraw_all(daemon, recs, withdrawn_by(cli), FORM_OVER)
        return form_decision(inp, [r.to_api() for r in recs]), digest
    return decision(cli, inp, recs[0].to_api()), digest


async def _now(daemon: Daemon, rec: Record) -> Record:
    """``rec`` as the inbox has it now (another question of the form may have been answered meanwhile)."""
    return (await daemon.inbox.get(rec.id) or rec) if rec.pending else rec


def _gave_up(rec: Record) -> bool:
    """A question of a form that will not be answered: declined, expired or cancelled."""
    return not rec.pending and (rec.outcome is None or not rec.outcome.answers)


async def _withdraw_all(daemon: Daemon, recs: list[Record], by: str, why: str) -> None:
    for rec in recs:
        if rec.pending:
            await _withdraw(daemon, rec, by, why)
