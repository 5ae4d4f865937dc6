"""The outbox: what the inbox holds, made visible in the room.

Five workers, each re-reading the inbox, so a restart picks up where the last
run stopped: ``post`` sends prompts not in the room yet (bot/room/poster.py: SEND_CONCURRENCY in flight with
the edits, with deterministic txn ids; a backlog never hides a new request); ``settle`` and ``pace`` edit
settled prompts to show their outcome; ``seed`` and ``clear`` run :mod:`bot.room.keycaps` (keycap reactions
under prompts still pending a second after posting, taken back once settled).

Prompts are the foreground, and so are the edits nothing else in the room shows
yet. A plain answer binds only to a prompt whose predecessors the room shows
settled, with nothing after its posting (bot/answers/timeline.py). A prompt settled by a
room answer is shown settled by that answer itself (its place in the timeline is
the settled mark), so its edit is the bot's own work: ``pace`` sends it once the room is quiet
(bot/room/quiet.py), at most EDIT_MAX_WAIT and then right after the next prompt is
posted: the homeserver persists one room's events in order, so an edit sent as
the next prompt or its quick answer is on its way makes that round slower. A
prompt settled any other way (API, CLI, hook, rule, timeout, cancel, an answer in
a thread) shows settled only by its edit: ``settle`` sends that edit at once and a new
prompt waits until it is in the room (else a plain answer under the new prompt
would be asked about). Keycaps are background work (bot/room/keycaps.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from bot.inbox.db.errors import DATABASE_ERRORS
from bot.inbox.db.fence import Deposed
from bot.inbox.record import Record
from bot.matrix.client import SendFailed, txn_id
from bot.room.poster import Poster
from bot.room.posts import progress_edit, settled_content, short_settled_content
from bot.util.aio import sleep_unless_stopped, wait_first
from bot.util.backoff import NO_JITTER, Backoff
from bot.util.outage import Outage

log = structlog.get_logger("outbox")

FOREGROUND = ("post", "settle")  # workers whose sends a person waits for


class Outbox(Poster):
    """The post, settle and seed workers over one inbox and one Matrix side."""

    def on_change(self, kind: str, rec: Record) -> None:
        """Inbox listener: a new request wakes the poster, a settlement the editor and the clean-up."""
        if kind == "request":
            self.foreground_idle.clear()  # a prompt is on its way: background sends hold back now
            self.wake_post.set()
        else:
            self.quiet.settled(rec.id, self.now())
            self.edits_idle.clear()
            self.foreground_idle.clear()
            self.wake_settle.set()
            self.wake_pace.set()
            self.keycaps.settled(rec.id)

    def tasks(self) -> list[asyncio.Task[None]]:
        """Start the workers."""
        steps = [("post", self.wake_post, self._post_step), ("settle", self.wake_settle, self._settle_step),
                 ("pace", self.wake_pace, self._pace_step), ("seed", self.keycaps.wake_seed, self.keycaps.seed_step),
                 ("clear", self.keycaps.wake_clear, self.keycaps.clear_step)]
        return [asyncio.create_task(self._worker(name, wake, step), name=name) for name, wake, step in steps]

    async def _worker(self, name: str, wake: asyncio.Event, step: Callable[[], Awaitable[float]]) -> None:
        """Run ``step`` whenever woken (or after the seconds it returns); back off on send failures."""
        pace = Backoff(0.5, 30.0, NO_JITTER)
        state_lost = Backoff(0.25, 2.0)  # the database away (a restart, a fail-over): back soon after it is
        outage = Outage(log, "outbox_state_unavailable", "outbox_state_back", worker=name)
        while not self.stop.is_set():
            wake.clear()
            foreground = name in FOREGROUND
            if foreground:
                self._foreground += 1
                self.foreground_idle.clear()
            try:
                idle = await step()
                pace.reset()
                state_lost.reset()
                outage.ok()
            except DATABASE_ERRORS as e:  # not now: the same step again once the state answers
                delay = state_lost.delay()
                outage.failed(str(e), delay)
                await sleep_unless_stopped(self.stop, delay)
                continue
            except SendFailed as e:
                delay = pace.delay()
                log.warning("send_failed", worker=name, error=str(e), retry_in=round(delay, 2))
                await sleep_unless_stopped(self.stop, delay)
                continue
            except (asyncio.CancelledError, Deposed):  # the term is over: the supervisor ends the Matrix side
                raise
            except Exception:
                log.exception("outbox_failed", worker=name)
                await sleep_unless_stopped(self.stop, 2.0)
                continue
            finally:
                if foreground:
                    self._foreground -= 1
                    if self._foreground == 0 and not (self.wake_post.is_set() or self.wake_settle.is_set()):
                        self.foreground_idle.set()
            await wait_first(self.stop, wake, seconds=idle)

    async def _settle_step(self) -> float:
        """Edit at once the settled prompts only their edit shows settled (a new prompt waits for these);
        and the pending quorum prompts whose approvals changed."""
        for rec in self._ready("progress", await self.inbox.needing_progress()):
            await self._pool("progress", self._progress, [rec], self.sends)
        try:
            while batch := self._ready("edit", await self._edits_due(shown=False)):
                await self._pool("edit", self._edit, batch, self.sends)
        finally:  # also when a send failed: its retry must not hold new prompts back
            if not self.wake_settle.is_set():
                self.edits_idle.set()
        return self.retries.next_in(self.now(), 10.0)

    async def _pace_step(self) -> float:
        """Edit the settled prompts their room answers already show settled, once the room is quiet (overdue
        ones right after the next prompt is posted); never in the way of the next prompt's post."""
        later = self._ready("edit", await self._edits_due(shown=True))
        if not later:
            self.pacer.done()
            return self.retries.next_in(self.now(), 10.0)
        now = self.now()
        busy = self.quiet.busy_for(now, posting=self._posting or self.wake_post.is_set())
        wait = self.pacer.wait(now, busy, self.quiet.posts)
        if wait > 0:
            return wait
        await self._pool("edit", self._edit, later, self.paced_sends)
        return 0.0

    async def _edits_due(self, shown: bool) -> list[Record]:
        recs = await self.inbox.needing_edit(limit=256 + self.retries.waiting(), shown=shown)
        return [r for r in recs if r.id not in self._editing]

    async def _pool(
        self, kind: str, send: Callable[[Record], Awaitable[None]], batch: list[Record], sem: asyncio.Semaphore
    ) -> None:
        """Run ``send`` over ``batch`` within ``sem`` (``sends``: prompts and urgent edits together;
        ``paced_sends``); a record whose send fails backs off alone."""

        async def one(rec: Record) -> None:
            async with sem:
                await self._attempt(kind, send, rec)

        results = await asyncio.gather(*(one(r) for r in batch), return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r

    async def _progress(self, rec: Record) -> None:
        n = len(rec.approvals)
        escalated = "x" if rec.escalated_at is not None else ""
        await self.matrix.send(progress_edit(rec), txn_id("q", self.inbox.install_id, rec.id, str(n), escalated),
                               room=rec.room)
        await self.inbox.mark_progress_shown(rec.id, n)
        log.info("prompt_progress_edited", request_id=rec.id, approvals=n, needed=rec.approvals_needed)

    async def _edit(self, rec: Record) -> None:
        self._editing.add(rec.id)  # settle and pace never send the same edit at once
        try:
            # One txn per outcome: a retried edit is deduplicated, an amended outcome (a watched harness that
            # no longer took the answer, bot/harness/) is a new edit.
            o = rec.outcome
            amended = () if o is None or not o.answered_by.startswith("harness:") else (o.answered_by, o.via, rec.state)
            event_id = await self._send_or_short(
                rec, settled_content(rec), short_settled_content, "e", "edit_too_large", "outcome line only", *amended
            )
            self.timings.edited(rec.id, self.now(), via=o.via if o else None)
            await self.inbox.mark_edited(rec.id, event_id, shown=rec)  # an outcome amended meanwhile: edited again
            log.info("prompt_edited", request_id=rec.id, state=rec.state)
        finally:
            self._editing.discard(rec.id)
