"""The daemon's side of a hook: submit the request, hold it until it settles, withdraw it when the hook goes.

Used by ``POST /hooks/claude-code`` (and ``/hooks/codex``), which both the CLIs' HTTP hooks and
`permission-bot hook` call. A hook that goes away before an answer (the terminal answered, the
hook timed out, the process was killed: its connection closes) withdraws its request: it is
settled cancelled, the prompt is edited to say the hook went away (:data:`GONE`), later answers
get a notice.

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

from bot.events.states import Via
from bot.hooks.models import Cli, HookInput, parse_hook_input
from bot.hooks.output import decision
from bot.hooks.translate import build_submission
from bot.inbox.db.errors import DATABASE_ERRORS
from bot.inbox.record import Record
from bot.inbox.session_rules import origin_of
from bot.inbox.sessions import HOOK_KEY_PREFIX, proxy_of

if TYPE_CHECKING:
    from bot.service.daemon import Daemon

log = structlog.get_logger("hooks")

KEY_PREFIX = HOOK_KEY_PREFIX
TICK = 1.0  # how often a held request looks for its hook's connection and a twin


GONE = "withdrawn: the hook went away (its CLI stopped, answered in its terminal or timed out)"
"""Why a request whose hook stopped waiting was cancelled: nobody answered it here."""
RESTARTED = "withdrawn: the daemon restarted while the hook waited, so no answer could reach it"
TWIN = "withdrawn: the same request came through ACP, whose prompt decides"


def withdrawn_by(cli: str) -> str:
    """The ``answered_by`` of a request its hook withdrew (the reason goes in the feedback)."""
    return f"{cli} hook"


async def _twin(daemon: Daemon, inp: HookInput, room: str = "default") -> Record | None:
    """A pending request of the same session and tool input that came by the agent's other door: the
    ACP proxy run that claimed the session (a key of its run, its token), into the same room."""
    if inp.hook_event_name != "PermissionRequest":
        return None
    proxy = await proxy_of(daemon.inbox.db, inp.session_id)
    if proxy is None:  # no proxy relays this session: no other door, whatever was submitted under its id
        return None
    for rec in await daemon.inbox.pending(inp.session_id, room=room):
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
    body = build_submission(cli, inp, key=KEY_PREFIX + secrets.token_hex(16))
    rec, _ = await daemon.submit(body, submitted_by=submitted_by)
    try:
        while rec.pending:
            try:
                if gone():
                    await _withdraw(daemon, rec, withdrawn_by(cli), GONE)
                    return None, None
                if await _twin(daemon, inp, room) is not None:
                    await _withdraw(daemon, rec, withdrawn_by(cli), TWIN)
                    return None, None
                rec = await daemon.inbox.wait_settled(rec.id, TICK) or rec
            except DATABASE_ERRORS as e:  # the database away: the hook keeps its place (its retry would ask twice)
                log.warning("hook_hold_state_unavailable", request_id=rec.id, error=str(e)[:300])
                await asyncio.sleep(TICK)
    except asyncio.CancelledError:
        await asyncio.shield(_withdraw(daemon, rec, withdrawn_by(cli), GONE))
        raise
    return decision(cli, inp, rec.to_api()), rec.digest


async def withdraw_orphans(daemon: Daemon) -> int:
    """At start: withdraw pending hook requests; no hook can still be waiting on them. Returns how many."""
    n = 0
    for rec in await daemon.inbox.pending():
        if (rec.key or "").startswith(KEY_PREFIX):
            await _withdraw(daemon, rec, withdrawn_by(rec.label or "a"), RESTARTED)
            n += 1
    return n
