"""The daemon: wires the inbox, the Matrix side, the HTTP API and the timers together.

Data flows one way: a submission enters the inbox; the outbox posts what the
inbox holds; room events are parsed into answers and settled in the inbox; the
outbox edits what the inbox settled. Every loop re-reads the inbox, so a
restart picks up exactly where the last run stopped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection
from functools import partial
from typing import Any

import structlog

from bot.config import Config
from bot.events.states import Via
from bot.harness import Harnesses
from bot.inbox.db.errors import DATABASE_ERRORS
from bot.inbox.db.fence import Deposed
from bot.inbox.decisions import timeout_choice
from bot.inbox.other_daemons import Across
from bot.inbox.record import EXPIRED, Record, Settlement
from bot.inbox.sessions import PendingCaps, TooManyPending
from bot.inbox.store import Inbox
from bot.inbox.submission import parse_submission
from bot.matrix.client import Matrix
from bot.matrix.station import EventHandler
from bot.room.api_answers import settlement
from bot.room.outbox import Outbox
from bot.room.posts import check_submission
from bot.service import health
from bot.service.by_rule import ByRule
from bot.service.checkpoints import Checkpoints
from bot.service.escalation import Escalations
from bot.service.floods import Floods
from bot.service.hook_leases import HookLeases
from bot.service.leadership import Leadership, discard
from bot.service.metrics import Metrics, export_figures
from bot.service.rooms import RoomFigures, Rooms
from bot.service.state_db import new_holder, state_database
from bot.service.webhooks import Webhooks
from bot.util.aio import wait_first
from bot.util.backoff import Backoff
from bot.util.outage import Outage
from bot.util.statedir import secure_state_dir

log = structlog.get_logger("daemon")

class NotFound(Exception):
    """No pending request by that id."""


class Daemon:
    """One running permission-bot."""

    def __init__(self, cfg: Config, clock: Callable[[], float] = time.time) -> None:
        self.cfg = cfg
        self.now = clock
        secure_state_dir(cfg.state_dir)
        self.holder = new_holder()
        self.inbox = Inbox(state_database(cfg, self.holder))  # SQLite under state, or [state] database
        self.metrics = Metrics(pending=self.inbox.count_pending)
        self.stop = asyncio.Event()
        self.wake_timer = asyncio.Event()
        caps = PendingCaps(per_token=cfg.api.max_pending_per_token, per_session=cfg.api.max_pending_per_session)
        self.floods = Floods(caps, lambda room, text: self.matrix.rooms[room].notices.post(text))
        self.by_rule = ByRule(cfg, self.inbox, self.now, lambda: self.session_rules,
                             lambda: self.outbox.wake_post.set())  # the Matrix side of now (each term its own)
        self._build_matrix_side()  # matrix, outbox, rooms, checkpoints, escalations: built again each term
        self.room_figures = RoomFigures(self.rooms)
        self.metrics.registry.register(self.room_figures)
        # the listeners reach the Matrix side of now (a demoted leader builds a new one: bot.service.leadership)
        self.inbox.listen(self._on_change, every_daemon=True)
        self.inbox.listen(lambda k, r: self.outbox.on_change(k, r), every_daemon=True)  # another daemon's too
        self.inbox.on_release(lambda: self.outbox.wake_post.set())  # a held request another daemon released
        self.inbox.on_approved(lambda: self.outbox.wake_settle.set())  # a quorum prompt to edit
        self.inbox.listen(lambda k, r: self.outbox.timings.on_change(k, r))
        self.webhooks = Webhooks(cfg.webhooks)
        self.inbox.listen(self.webhooks.on_change)
        self.inbox.listen(self.metrics.on_change)
        export_figures(self.metrics, lambda: self.matrix, self.webhooks)
        self.harnesses = Harnesses(cfg.harnesses, self.inbox, now=self.now, timeout=cfg.prompts.timeout,
                                   after_new=self.by_rule.apply, room_of=cfg.room_of_harness)
        self.inbox.listen(self.harnesses.on_change, every_daemon=True)
        self.inbox.listen(lambda k, r: self.checkpoints.on_change(k, r), every_daemon=True)
        self.inbox.listen(lambda k, r: self.escalations.on_change(k, r), every_daemon=True)
        self.across = Across(self.inbox)  # LISTEN for other daemons' changes (PostgreSQL only)
        senders = [r.sender for r in self.matrix.rooms.values()]  # every station room's sends are fenced
        self.leadership = Leadership(self.inbox.database, senders)  # leader or standby
        self.leases = HookLeases(self.inbox, self.holder, self.now)  # the hooks this daemon holds are its own
        self.ready = False
        self.ready_at = 0.0

    def _build_matrix_side(self) -> None:
        """The Matrix side of one term, read from the state when it runs (nothing of an old term's kept)."""
        cfg, state = self.cfg, self.cfg.state_dir
        self.matrix = Matrix(cfg.matrix, self.inbox, str(state), rooms=[(r.name, r.room) for r in cfg.rooms],
                             refused_for=lambda name: partial(self.on_refused_event, room=name),
                             durable_device=self.inbox.database.dialect.is_postgres)  # the device in the database
        self.outbox = Outbox(self.inbox, self.matrix, self.metrics, cfg.prompts, self.stop, self.now,
                             lambda source: self.rooms.reprocess(source))  # a parked event, read again in its room
        self.rooms = Rooms(cfg, self.inbox, self.matrix, self.now, self.outbox.wake_post.set,
                           self.outbox.wake_settle.set)  # each station room's answers (bot/service/rooms.py)
        self.session_rules = self.rooms.answers["default"].session_rules
        self.checkpoints = Checkpoints(self.inbox, self.matrix, self.now)  # the ledger's head in the rooms
        self.escalations = Escalations(cfg, self.inbox, self.matrix, self.now)  # unanswered prompts, once

    async def demote(self) -> None:
        """The term is over and its tasks ended (bot.service.supervisor): a standby again, with the old term's
        Matrix side closed and a new one built for the next election; the API serves throughout."""
        self.ready, self.ready_at = False, 0.0
        self.leadership.demote()
        await discard(self.matrix)
        self._build_matrix_side()
        self.room_figures.rooms = self.rooms
        self.leadership.guard(r.sender for r in self.matrix.rooms.values())

    def health(self) -> dict[str, object]:
        """The ``/healthz`` body: ``status`` ``ok`` or ``degraded`` with its reasons."""
        m = self.matrix
        facts = health.Facts(
            ready=self.ready, joined=m.syncer.joined, last_sync_ok=m.syncer.last_sync_ok, ready_at=self.ready_at,
            sync_timeout=self.cfg.matrix.sync_timeout, send_failing=m.sender.send_failing, rate_limit=m.gate.status(),
        )
        out = health.body(facts, self.now(), m.syncer.connected, self.harnesses.health(), role=self.leadership.role,
                          database=self.inbox.database.unreachable)
        if self.cfg.rooms:  # more than one station room: each one's state
            out["rooms"] = self.rooms.health()
        return out

    # -- inbox events ------------------------------------------------------
    def _on_change(self, kind: str, rec: Record) -> None:
        if kind == "request":
            self.wake_timer.set()

    # -- the service the HTTP API calls --------------------------------------
    async def submit(self, body: Any, submitted_by: str | None = None, *, held: bool = False) -> tuple[Record, bool]:
        """Store a submission (SubmissionError on bad input) made with the token ``submitted_by``;
        config rules apply at once. ``held``: a hook waits on this daemon for it (bot.service.hook_leases)."""
        sub = parse_submission(body)
        self.harnesses.refuse_reserved(sub.session_id)
        now = self.now()
        room = self.cfg.room_of_token(submitted_by)  # by the credential alone, never by the body
        m = self.matrix  # before the first sync, whether the room is encrypted is not known yet
        encrypted = m.rooms[room].encrypted or (self.cfg.matrix.encryption and not m.syncer.synced.is_set())
        check_submission(sub, now, self.cfg.prompts.timeout, encrypted=encrypted)
        try:
            rec, created = await self.inbox.submit(
                sub, now, self.cfg.prompts.timeout, submitted_by, hold_post=True, room=room, caps=self.floods.caps,
                held_by=self.holder if held else None,
            )
        except TooManyPending as e:  # answered 429; the room hears once when a token reaches its cap
            self.floods.refused(e.token, room, now)
            raise
        if created:
            self.floods.accepted(submitted_by)
            log.info("request_submitted", request_id=rec.id, title=rec.title, tool_kind=rec.tool_kind, room=room)
            rec = await self.by_rule.apply(rec)
        return rec, created

    async def decide(
        self,
        request_id: str,
        decision: str,
        *,
        option_id: str | None = None,
        scope: str | None = None,
        feedback: str | None = None,
        by: str = "api",
        rooms: Collection[str] | None = None,
        answer: str | None = None,
        person: str | None = None,
    ) -> Record:
        """Settle from the HTTP API. NotFound when unknown, no longer pending, or (``rooms``: the
        decider's rooms) in another room; NoFittingOption; NotCounted (a quorum's approval by a token that
        is no person, or not an answerer's). ``answer``: a question's (decision ``answer``); ``person``: whom
        the deciding token belongs to."""
        rec = await self.inbox.get(request_id)
        if rec is None or not rec.pending or (rooms is not None and rec.room not in rooms):
            raise NotFound(request_id)
        how = Via.CANCEL if decision == "cancel" else Via.API
        plan = settlement(rec, decision, option_id=option_id, scope=scope, answer=answer, by=by, via=how)
        chosen = plan.option_id
        settled = await self.inbox.settle(request_id, Settlement(
            chosen, by, how, self.now(), feedback, answers=plan.answers, chosen=plan.chosen, person=person))
        if settled is None:
            raise NotFound(request_id)
        log.info("request_decided", request_id=request_id, option_id=chosen, via=how, by=by)
        return settled

    # -- room events ----------------------------------------------------------
    async def on_refused_event(self, source: dict[str, Any], room: str = "default") -> None:
        """An event the trust policy refused: never an answer, but a refused look-alike prompt still counts."""
        await self.rooms.answers[room].refused(source)

    # -- timeouts ------------------------------------------------------------
    async def timer_loop(self) -> None:
        outage = Outage(log, "timer_state_unavailable", "timer_state_back")
        pace = Backoff(0.5, 5.0)  # the database away: tried again soon, so what fell due meanwhile expires in time
        while not self.stop.is_set():
            self.wake_timer.clear()
            try:
                if await self.session_rules.expire(self.now() - self.cfg.prompts.session_rule_ttl):
                    log.info("session_rules_expired")
                for rec in await self.inbox.due(self.now()):
                    option = timeout_choice(rec.options, self.cfg.prompts.on_timeout)
                    settled = await self.inbox.settle(
                        rec.id, Settlement(option, "timeout", Via.TIMEOUT, self.now(), state=EXPIRED))
                    if settled:
                        log.info("request_expired", request_id=rec.id, option_id=option)
                nxt = await self.inbox.next_expiry()
                outage.ok()
                pace.reset()
            except (asyncio.CancelledError, Deposed):  # Deposed: the term is over (the supervisor demotes)
                raise
            except DATABASE_ERRORS as e:  # not now: tried again shortly
                outage.failed(e)
                nxt = self.now() + pace.delay()
            except Exception:
                log.exception("timer_failed")
                nxt = None
            wait = 30.0 if nxt is None else max(0.05, min(30.0, nxt - self.now()))
            wait = min(wait, max(0.5, self.cfg.prompts.session_rule_ttl / 4))  # idle rules go in time
            await wait_first(self.stop, self.wake_timer, seconds=wait)

    # -- lifecycle -------------------------------------------------------------
    async def start(self) -> None:
        await self.inbox.open()  # also reads (or makes) the install id the outbox's txn ids carry
        await self.across.start()

    async def connect(self) -> None:
        """Log in and join every station room; then the daemon is ready."""
        try:
            await self.matrix.session.login()
            await self.matrix.join_room()
        except Exception:  # a failed start logs out the device it logged in (none left behind)
            await self.matrix.session.forget_new_device()
            raise
        self.ready = True
        self.ready_at = self.now()
        rooms = ", ".join(r.room_id for r in self.matrix.rooms.values())
        log.info("ready", message=f"permission-bot is ready: {self.matrix.user_id} in {rooms}, "
                 f"the API on {self.cfg.api.listen}")

    def matrix_tasks(self) -> list[asyncio.Task[None]]:
        """The Matrix-side tasks, started (sync, outbox workers, notices, harness watchers); run by
        :class:`bot.service.supervisor.Supervisor`, which stops them."""
        def handler_for(name: str) -> EventHandler:  # stamps when answers are seen
            return self.outbox.timings.room_handler(self.rooms.answers[name].handle, self.now)

        return [
            asyncio.create_task(self.matrix.sync_forever(handler_for("default"), self.stop, handler_for), name="sync"),
            *self.outbox.tasks(),
            *(asyncio.create_task(r.notices.run(self.stop), name=f"notices:{name}")
              for name, r in self.matrix.rooms.items()),
            *self.harnesses.tasks(self.stop),
            asyncio.create_task(self.checkpoints.run(self.stop), name="checkpoints"),
            asyncio.create_task(self.escalations.run(self.stop), name="escalations"),
        ]

    async def close(self) -> None:
        await self.leadership.resign()
        await self.harnesses.close()
        await self.matrix.close()
        await self.across.stop()
        await self.leases.close()
        await self.inbox.close()
