"""The outbox's poster: prompts not in the room yet, sent as send slots free, in bot/room/backlog.py's order
(in the order they came while the homeserver rate-limits the bot: a few a minute, none may jump the line;
a form's questions one after another, in its order).

The base of :class:`bot.room.outbox.Outbox` (it holds the outbox's state): one worker step,
``_post_step``, keeps up to SEND_CONCURRENCY sends in flight (the slots are shared with the urgent edits) and
picks each next prompt when a slot frees, reading the inbox again whenever a request arrived, so a request
submitted now never waits behind a backlog. A request a rule settled before it was posted goes settled, in
one event; one settled while its prompt was on its way has its edit sent at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from typing import Any, Protocol

import structlog

from bot.config import PromptsConfig
from bot.events.states import Via
from bot.inbox.posting import HOLD_LAPSE
from bot.inbox.record import Record
from bot.inbox.store import Inbox
from bot.matrix import rate
from bot.matrix.client import Matrix, SendFailed, txn_id
from bot.matrix.retry import MatrixBackoff
from bot.room import backlog
from bot.room.keycaps import Keycaps
from bot.room.posts import (
    full_text_notices,
    prompt_content,
    remember_complete,
    settled_new_content,
    short_prompt_content,
    short_settled_new_content,
)
from bot.room.quiet import EditPacer, Quiet
from bot.room.timing import Timings
from bot.util.aio import wait_first
from bot.util.backoff import KeyedBackoff

log = structlog.get_logger("outbox")

EDITS_FIRST_WAIT = 2.0  # seconds a new prompt waits at most for the edits due that nothing else shows
# Sends in flight to the homeserver at once, prompts and edits together. The room's DAG sets it: each
# event the homeserver creates names at most 10 forward extremities as its prev_events, and events created
# at once name the same ones, so more than 10 in flight (with the people's answers) forks the room for
# good: Synapse then checks every extremity for each event it persists (bench/scale.py measured 16 in flight
# growing them into the thousands, and posting slowing from 19 to 6 a second). Synapse persists one room's
# events one at a time anyway; 6 keeps that queue full and leaves room for a few people answering at once.
SEND_CONCURRENCY = 6
# Edits the room already shows (their answers do) go as one burst (bot/room/quiet.py: one round pays for a few
# seconds' edits), at most this many at once: the homeserver's 10 prev_events again.
PACED_CONCURRENCY = 10
TURN = {"p": rate.PROMPT, "e": rate.EDIT}  # a prompt's and an edit's place among the sends a limit holds


def settled_by_rule(rec: Record) -> bool:
    """Settled by a config or session rule when it arrived (not by a decider's ``watch``, which says
    ``via: rule`` too but answers prompts already in the room)."""
    o = rec.outcome
    return o is not None and o.via == Via.RULE and not o.answered_by.startswith("api:")


class Counts(Protocol):
    """What the outbox counts (:class:`bot.service.metrics.Metrics` keeps the figures)."""

    def posted(self) -> None: ...


class Poster:
    """``_post_step`` and the sends it makes; the state of the whole outbox (:class:`bot.room.outbox.Outbox`)."""

    def __init__(
        self, inbox: Inbox, matrix: Matrix, metrics: Counts, prompts: PromptsConfig, stop: asyncio.Event,
        now: Callable[[], float], reprocess: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> None:
        self.inbox = inbox
        self.matrix = matrix
        self.metrics = metrics
        self.prompts = prompts
        self.stop = stop
        self.now = now
        self.reprocess = reprocess  # a parked room event, once its prompt's event id is known
        self.wake_post = asyncio.Event()
        self.wake_settle = asyncio.Event()
        self.wake_pace = asyncio.Event()
        self.foreground_idle = asyncio.Event()  # no prompt and no edit being sent
        self.foreground_idle.set()
        self._foreground = 0
        self.sends = asyncio.Semaphore(SEND_CONCURRENCY)  # prompts and urgent edits in flight, together
        self.paced_sends = asyncio.Semaphore(PACED_CONCURRENCY)  # edits the room already shows
        self.retries = KeyedBackoff(MatrixBackoff)  # per record: one failing send never delays another record's
        self.quiet = Quiet()  # edits and keycaps wait for it
        self.edits_idle = asyncio.Event()  # no edit due that only it can show: a new prompt may go
        self.edits_idle.set()
        self._posting = False  # prompts being sent now
        self._editing: set[str] = set()  # request ids whose edit is being sent (by settle or pace)
        self.pacer = EditPacer()  # edits the room already shows (by their answers) wait for a quiet room
        self.timings = Timings()  # each request's way through, logged as request_timing once edited
        self.keycaps = Keycaps(inbox, matrix, prompts.seed_reactions, prompts.clear_reactions, stop, now, self.quiet,
                               self.foreground_idle)

    def _ready(self, kind: str, recs: list[Record]) -> list[Record]:
        now = self.now()
        return [r for r in recs if self.retries.ready(f"{kind}:{r.id}", now)]

    async def _post_step(self) -> float:
        """Post every prompt not in the room yet, SEND_CONCURRENCY at once with the urgent edits: each next one
        is picked when a send slot frees, re-reading the inbox whenever a request arrived (bot/room/backlog.py:
        with a backlog, what arrives now goes next); then re-read answers parked for them."""
        flying: dict[str, asyncio.Task[None]] = {}
        freed, errors = asyncio.Event(), list[BaseException]()
        queue: list[Record] = []
        try:
            while not self.stop.is_set() and not errors:
                if not queue or self.wake_post.is_set():
                    self.wake_post.clear()
                    queue = await self._to_post(flying)
                if not queue:
                    if not flying:
                        break
                    freed.clear()
                    await wait_first(self.stop, self.wake_post, freed)
                    continue
                if not self.edits_idle.is_set():  # the edits nothing else shows go first (see the module docstring)
                    await wait_first(self.stop, self.edits_idle, seconds=EDITS_FIRST_WAIT)
                await self.sends.acquire()
                if self.wake_post.is_set():  # a request arrived while this waited for a slot: it may go first
                    self.sends.release()
                    continue
                rec = queue.pop(0)
                self._posting = True
                flying[rec.id] = asyncio.create_task(self._post_one(rec, flying, freed, errors))
        except asyncio.CancelledError:
            for task in flying.values():
                task.cancel()
            raise
        finally:
            await asyncio.gather(*flying.values(), return_exceptions=True)
            self._posting = False
        if errors:
            raise errors[0]
        for source in await self.inbox.take_parked():
            await self.reprocess(source)
        return self.retries.next_in(self.now(), 10.0)

    async def _to_post(self, flying: Collection[str]) -> list[Record]:
        """The prompts to send next, in backlog.order (two reads from the ends of the requests_unposted index);
        oldest first while the homeserver rate-limits the bot; a form's later questions wait until its earlier ones
        are in the room (backlog.in_form_order)."""
        extra = self.retries.waiting() + len(flying)
        held = self.now() - HOLD_LAPSE

        def ready(recs: list[Record]) -> list[Record]:
            return [r for r in self._ready("post", recs) if r.id not in flying]

        oldest = await self.inbox.needing_post(limit=backlog.BACKLOG + 1 + extra, held_before=held)
        newest: list[Record] = []
        if len(ready(oldest)) > backlog.BACKLOG and not self.matrix.rate_limited:  # limited: in the order they came
            newest = await self.inbox.needing_post(limit=backlog.NEWEST + extra, held_before=held, newest=True)
        return backlog.in_form_order(backlog.order(ready(oldest), ready(newest)), oldest + newest)

    async def _send_or_short(
        self, rec: Record, content: dict[str, Any], short: Callable[[Record], dict[str, Any]], kind: str, event: str,
        fallback: str, *parts: str,
    ) -> str:
        """Send ``content`` (txn ``kind``); one the homeserver refuses as too large goes as ``short(rec)`` (txn
        ``kind`` + "s"), logged as ``event``. Returns the event id."""
        turn, order = TURN[kind], rec.requested_at  # its place while the homeserver rate-limits the bot
        try:
            return await self.matrix.send(
                content, txn_id(kind, self.inbox.install_id, rec.id, *parts), room=rec.room, kind=turn, order=order
            )
        except SendFailed as e:
            if not e.too_large:
                raise
            log.warning(event, request_id=rec.id, fallback=fallback)
            short_txn = txn_id(kind + "s", self.inbox.install_id, rec.id, *parts)
            return await self.matrix.send(short(rec), short_txn, room=rec.room, kind=turn, order=order)

    async def _attempt(self, kind: str, send: Callable[[Record], Awaitable[None]], rec: Record) -> None:
        """``send(rec)``; a ``SendFailed`` backs off this record's ``kind`` sends alone (logged, not raised)."""
        key = f"{kind}:{rec.id}"
        try:
            await send(rec)
        except SendFailed as e:
            delay = self.retries.failed(key, self.now())
            log.warning("send_failed", worker=kind, request_id=rec.id, error=str(e), retry_in=round(delay, 2))
            return
        self.retries.ok(key)

    async def _post_one(
        self, rec: Record, flying: dict[str, asyncio.Task[None]], freed: asyncio.Event, errors: list[BaseException]
    ) -> None:
        """Send one prompt in a slot taken from ``sends``; a send that fails backs off alone."""
        try:
            await self._attempt("post", self._post, rec)
        except Exception as e:  # the step raises it once the others are done (the worker logs and waits)
            errors.append(e)
        finally:
            self.sends.release()
            flying.pop(rec.id, None)
            freed.set()

    async def _post(self, rec: Record) -> None:
        if settled_by_rule(rec):  # held from the poster until its rules settled it, so never posted before:
            await self._post_settled(rec)  # it goes settled, in one event (no edit follows)
            return
        content = prompt_content(rec)
        self.timings.mark(rec.id, "sending", self.now())
        event_id = await self._send_or_short(
            rec, content, short_prompt_content, "p", "prompt_too_large", "short prompt"
        )
        self.quiet.posted(rec.id, self.now())
        self.timings.mark(rec.id, "posted", self.now())
        if self.pacer.holding:  # overdue edits go while the person reads this prompt
            self.wake_pace.set()
        if not await self.inbox.set_prompt_event(rec.id, event_id, self.now()):
            self.edits_idle.clear()  # settled while on its way: its edit could not be sent before; now it can
            self.wake_settle.set()
        self.metrics.posted()
        self.keycaps.wake_seed.set()
        log.info("prompt_posted", request_id=rec.id, event_id=event_id)
        if not remember_complete(rec, content):  # shortened: the full text goes in its thread
            try:
                for n, notice in enumerate(full_text_notices(rec, event_id)):  # a long plan: in parts
                    part = () if n == 0 else (str(n),)
                    await self.matrix.send(notice, txn_id("f", self.inbox.install_id, rec.id, *part), room=rec.room)
            except SendFailed as e:  # best effort: the prompt still says it was cut, and needs a reply
                log.warning("full_text_not_posted", request_id=rec.id, error=str(e))

    async def _post_settled(self, rec: Record) -> None:
        """A request a rule settled before it was posted: its prompt showing the outcome, one event."""
        self.timings.mark(rec.id, "sending", self.now())
        event_id = await self._send_or_short(
            rec, settled_new_content(rec), short_settled_new_content, "p", "prompt_too_large", "outcome line only"
        )
        await self.inbox.set_posted_settled(rec.id, event_id, self.now())
        self.timings.mark(rec.id, "posted", self.now())
        self.timings.edited(rec.id, self.now(), via=Via.RULE)
        self.metrics.posted()
        log.info("prompt_posted", request_id=rec.id, event_id=event_id, settled=True)
