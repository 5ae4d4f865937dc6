"""The daemon: wires the inbox, the Matrix side, the HTTP API and the timers together.

Data flows one way: a submission enters the inbox; the outbox posts what the
inbox holds; room events are parsed into answers and settled in the inbox; the
outbox edits what the inbox settled. Every loop re-reads the inbox, so a
restart picks up exactly where the last run stopped.
"""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from bot import answers
from bot.config import Config
from bot.inbox.decisions import NoFittingOption, choose, timeout_choice
from bot.inbox.record import EXPIRED, Record
from bot.inbox.store import Inbox
from bot.inbox.submission import parse_submission
from bot.matrix.client import Matrix, SendFailed, txn_id
from bot.matrix.room import may_answer
from bot.metrics import Metrics
from bot.notices import Notices
from bot.prompts import build_prompt, build_settled, edit_content
from bot.timeutil import iso_ms, to_datetime
from bot.webhooks import Webhooks

log = structlog.get_logger("daemon")

SEND_CONCURRENCY = 16  # sends in flight to the homeserver at once
EDIT_COALESCE = 0.25  # seconds settled prompts wait so a burst of answers is edited in one pass
SEED_DELAY = 1.0  # seconds a prompt waits for a quick answer before the bot seeds keycap reactions
NOT_POSTED = ""  # prompt_event_id of a rule-settled request that is recorded but not posted
VIA_WORDS = {
    "matrix": "reply",
    "reaction": "reaction",
    "structured": "structured answer",
    "api": "the HTTP API",
    "rule": "a rule",
    "timeout": "timeout",
    "cancel": "cancellation",
}


class NotFound(Exception):
    """No pending request by that id."""


def prompt_content(rec: Record) -> dict[str, Any]:
    """The prompt exactly as posted for ``rec`` (rebuilt: it is a pure function of the record)."""
    return build_prompt(
        request_id=rec.id,
        session_id=rec.session_id,
        request_seq=rec.request_seq,
        title=rec.title,
        tool_kind=rec.tool_kind,
        options=rec.options,
        raw_input=rec.raw_input,
        locations=rec.locations,
        content=rec.content,
        digest=rec.digest,
        revision=rec.revision,
        expires_at=to_datetime(rec.expires_at),
        tool_name=rec.tool_name,
        label=rec.label,
    )


def settled_content(rec: Record) -> dict[str, Any]:
    """The m.replace edit that shows ``rec``'s outcome."""
    assert rec.outcome is not None and rec.prompt_event_id
    o = rec.outcome
    new = build_settled(
        prompt_content(rec),
        state=rec.state,
        option_id=o.option_id,
        option_name=rec.option_name(o.option_id),
        answered_by=o.answered_by,
        via=o.via,
        feedback=o.feedback,
        decided_at=to_datetime(o.decided_at),
    )
    return edit_content(rec.prompt_event_id, new)


def describe_outcome(rec: Record) -> str:
    """``Allow once, by @alice:hs via reply at 2026-...Z``."""
    o = rec.outcome
    if o is None:
        return "still pending"
    what = rec.option_name(o.option_id) if o.option_id else "cancelled"
    return f"{what}, by {o.answered_by} via {VIA_WORDS.get(o.via, o.via)} at {iso_ms(o.decided_at)}"


class Daemon:
    """One running permission-bot."""

    def __init__(self, cfg: Config, clock: Callable[[], float] = time.time) -> None:
        self.cfg = cfg
        self.now = clock
        state = cfg.state_dir
        state.mkdir(parents=True, exist_ok=True)
        self.inbox = Inbox(state / "inbox.sqlite3")
        self.matrix = Matrix(cfg.matrix, self.inbox, str(state))
        self.metrics = Metrics()
        self.notices = Notices(self.matrix)
        self.matrix.say = self.notices.post  # the Matrix side's own notices (undecryptable, unverified)
        self.stop = asyncio.Event()
        self.wake_post = asyncio.Event()
        self.wake_settle = asyncio.Event()
        self.wake_seed = asyncio.Event()
        self.posting_idle = asyncio.Event()
        self.posting_idle.set()
        self.wake_timer = asyncio.Event()
        self.install_id = ""
        self.rules: list[Any] = []
        if cfg.rules:
            from bot.rules import parse_rules

            self.rules = parse_rules(list(cfg.rules))
        self.inbox.listen(self._on_change)
        self.webhooks = Webhooks(cfg.webhooks)
        self.inbox.listen(self.webhooks.on_change)
        self.ready = False

    # -- inbox events ------------------------------------------------------
    def _on_change(self, kind: str, rec: Record) -> None:
        (self.wake_post if kind == "request" else self.wake_settle).set()
        if kind == "request":
            self.wake_timer.set()
            self.metrics.submitted()
        elif rec.outcome is not None:
            self.metrics.settled(rec.state, rec.outcome.via, rec.outcome.decided_at - rec.requested_at)

    # -- the service the HTTP API calls --------------------------------------
    async def submit(self, body: Any) -> tuple[Record, bool]:
        """Store a submission (SubmissionError on bad input); config rules apply at once."""
        sub = parse_submission(body)
        rec, created = await self.inbox.submit(sub, self.now(), self.cfg.prompts.timeout)
        if created:
            log.info("request_submitted", request_id=rec.id, title=rec.title, tool_kind=rec.tool_kind)
            if self.rules:
                rec = await self._apply_rules(rec)
        return rec, created

    async def _apply_rules(self, rec: Record) -> Record:
        from bot.rules import decide

        rule = decide(self.rules, rec.to_api())
        if rule is None:
            return rec
        try:
            option = choose(rec.options, rule.decision, scope=rule.scope, option_id=rule.option_id)
        except NoFittingOption as e:
            log.warning("rule_not_applicable", request_id=rec.id, reason=str(e))
            return rec
        settled = await self.inbox.settle(
            rec.id, option_id=option, by="rule", via="rule", feedback=None, now=self.now()
        )
        if settled is None:
            return rec
        if not self.cfg.prompts.post_rule_settled:
            await self.inbox.set_prompt_event(rec.id, NOT_POSTED)
        log.info("request_settled_by_rule", request_id=rec.id, option_id=option)
        return settled

    async def decide(
        self,
        request_id: str,
        decision: str,
        *,
        option_id: str | None = None,
        scope: str | None = None,
        feedback: str | None = None,
        by: str = "api",
        via: str = "api",
    ) -> Record:
        """Settle from the HTTP API. NotFound when unknown or no longer pending; NoFittingOption."""
        rec = await self.inbox.get(request_id)
        if rec is None or not rec.pending:
            raise NotFound(request_id)
        chosen = choose(rec.options, decision, scope=scope, option_id=option_id)
        if decision == "cancel":
            via = "cancel"
        settled = await self.inbox.settle(
            request_id, option_id=chosen, by=by, via=via, feedback=feedback, now=self.now()
        )
        if settled is None:
            raise NotFound(request_id)
        log.info("request_decided", request_id=request_id, option_id=chosen, via=via, by=by)
        return settled

    # -- room events ----------------------------------------------------------
    async def on_room_event(self, source: dict[str, Any]) -> None:
        """One station-room event: maybe an answer."""
        event_id = source.get("event_id")
        if not isinstance(event_id, str) or await self.inbox.is_handled(event_id):
            return
        cand = answers.classify(source, bot_user_id=self.matrix.user_id)
        if cand is None:
            return
        target_rec: Record | None = None
        if cand.request_id:
            target_rec = await self.inbox.get(cand.request_id)
        elif cand.prompt_event_id:
            target_rec = await self.inbox.by_prompt_event(cand.prompt_event_id)
        if target_rec is None and cand.prompt_event_id and await self.inbox.needing_post(limit=1):
            # It may answer a prompt that reached the room before a crash kept its event id:
            # keep it until the outbox has (re)posted, which recovers that id.
            await self.inbox.park(event_id, source, self.now())
            self.wake_post.set()
            return
        pending = [] if cand.explicit else await self.inbox.pending()
        verdict = answers.resolve(cand, _target(target_rec) if target_rec else None, [_target(r) for r in pending])
        if verdict is None:
            return
        now = self.now()
        thread_root = target_rec.prompt_event_id if target_rec else None
        if isinstance(verdict, answers.Answer):
            thread_root = (await self._prompt_of(verdict.request_id)) or thread_root
        if not may_answer(
            cand.sender,
            users=self.cfg.answerers.users,
            min_power_level=self.cfg.answerers.min_power_level,
            room=self.matrix.room,
        ):
            await self.inbox.mark_handled(event_id, now)
            await self._tell_not_answerer(cand.sender, event_id, thread_root)
            log.info("answer_refused", event_id=event_id, sender=cand.sender, reason="not an answerer")
            return
        if isinstance(verdict, answers.Refusal):
            await self.inbox.mark_handled(event_id, now)
            msg = verdict.message
            if verdict.kind == "not_pending" and target_rec is not None:
                msg = f"Already settled: {describe_outcome(target_rec)}."
            self.notices.post(msg, reply_to=event_id, thread_root=thread_root)
            log.info("answer_refused", event_id=event_id, sender=cand.sender, reason=verdict.kind)
            return
        settled = await self.inbox.settle(
            verdict.request_id,
            option_id=verdict.option_id,
            by=verdict.sender,
            via=verdict.via,
            feedback=verdict.feedback,
            now=now,
            event_id=event_id,
        )
        if settled is None:
            await self.inbox.mark_handled(event_id, now)
            late = await self.inbox.get(verdict.request_id)
            if late is not None:
                self.notices.post(
                    f"Already settled: {describe_outcome(late)}. Your answer changed nothing.",
                    reply_to=event_id,
                    thread_root=late.prompt_event_id or None,
                )
            return
        log.info(
            "request_answered", request_id=settled.id, option_id=verdict.option_id, via=verdict.via,
            by=verdict.sender,
        )

    async def _prompt_of(self, request_id: str) -> str | None:
        rec = await self.inbox.get(request_id)
        return rec.prompt_event_id if rec and rec.prompt_event_id else None

    async def _tell_not_answerer(self, user: str, event_id: str, thread_root: str | None) -> None:
        key = f"told.not_answerer.{user}"
        if await self.inbox.get_kv(key):
            return
        await self.inbox.set_kv(key, iso_ms(self.now()))
        self.notices.post(
            f"Sorry {user}, you are not on the list of people who may answer permission prompts here, "
            "so your answer changed nothing.",
            reply_to=event_id,
            thread_root=thread_root,
        )

    # -- the outbox: three workers, so a new prompt never waits behind an edit ---
    async def _worker(self, name: str, wake: asyncio.Event, step: Callable[[], Awaitable[float]]) -> None:
        """Run ``step`` whenever woken (or after the seconds it returns); back off on send failures."""
        delay = 0.5
        while not self.stop.is_set():
            wake.clear()
            try:
                idle = await step()
                delay = 0.5
            except SendFailed as e:
                log.warning("send_failed", worker=name, error=str(e), retry_in=round(delay, 2))
                await _wait(self.stop, delay)
                delay = min(delay * 2, 30.0)
                continue
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("outbox_failed", worker=name)
                await _wait(self.stop, 2.0)
                continue
            await _wait_any(self.stop, wake, idle)

    async def _post_step(self) -> float:
        """Post every prompt not in the room yet; then re-read answers parked for them."""
        while batch := await self.inbox.needing_post(limit=256):
            self.posting_idle.clear()
            try:
                await self._pool(self._post, batch)
            finally:
                self.posting_idle.set()
        for source in await self.inbox.take_parked():
            await self.on_room_event(source)
        return 10.0

    async def _settle_step(self) -> float:
        """Edit settled prompts to show their outcome; take back the seeded keycaps."""
        await _wait(self.stop, EDIT_COALESCE)  # answers often come in bursts: edit them in one pass
        if not self.posting_idle.is_set():  # a new prompt is on its way: it goes first
            await _wait_any(self.stop, self.posting_idle, 5.0)
        while batch := [r for r in await self.inbox.needing_edit(limit=256) if r.prompt_event_id != NOT_POSTED]:
            await self._pool(self._edit, batch)
        for rid, key, ev in await self.inbox.reactions_to_clear():
            await self.matrix.redact(ev, txn_id("x", self.install_id, rid, key), reason="settled")
            await self.inbox.mark_reaction_redacted(rid, key)
        return 10.0

    async def _seed_step(self) -> float:
        """Seed keycaps under prompts still pending SEED_DELAY after posting (quick answers need none)."""
        if not self.cfg.prompts.seed_reactions:
            return 3600.0
        cutoff = self.now() - SEED_DELAY
        for rec in await self.inbox.needing_seed(posted_before=cutoff, limit=8):
            have = {k for k, _e, _r in await self.inbox.reactions(rec.id)}
            for i, key in enumerate(answers.KEYCAPS[: len(rec.options)]):
                if key in have or not await self._still_pending(rec.id):
                    continue
                ev = await self.matrix.send(
                    {"m.relates_to": {"rel_type": "m.annotation", "event_id": rec.prompt_event_id, "key": key}},
                    txn_id("r", self.install_id, rec.id, str(i)),
                    "m.reaction",
                )
                await self.inbox.add_reaction(rec.id, key, ev)
            await self.inbox.mark_seeded(rec.id)
            self.wake_settle.set()  # it may have been answered meanwhile
        nxt = await self.inbox.next_seed_due()
        return 10.0 if nxt is None else max(0.05, min(10.0, nxt + SEED_DELAY - self.now()))

    async def _pool(self, send: Callable[[Record], Awaitable[None]], batch: list[Record]) -> None:
        """Run ``send`` over ``batch`` with at most SEND_CONCURRENCY in flight; the first failure is raised."""
        sem = asyncio.Semaphore(SEND_CONCURRENCY)

        async def one(rec: Record) -> None:
            async with sem:
                await send(rec)

        results = await asyncio.gather(*(one(r) for r in batch), return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r

    async def _post(self, rec: Record) -> None:
        content = prompt_content(rec)
        event_id = await self.matrix.send(content, txn_id("p", self.install_id, rec.id))
        await self.inbox.set_prompt_event(rec.id, event_id, self.now())
        self.metrics.posted()
        self.wake_seed.set()
        log.info("prompt_posted", request_id=rec.id, event_id=event_id)

    async def _edit(self, rec: Record) -> None:
        await self.matrix.send(settled_content(rec), txn_id("e", self.install_id, rec.id))
        await self.inbox.mark_edited(rec.id)
        log.info("prompt_edited", request_id=rec.id, state=rec.state)

    async def _still_pending(self, request_id: str) -> bool:
        rec = await self.inbox.get(request_id)
        return rec is not None and rec.pending

    # -- timeouts ------------------------------------------------------------
    async def timer_loop(self) -> None:
        while not self.stop.is_set():
            self.wake_timer.clear()
            try:
                for rec in await self.inbox.due(self.now()):
                    option = timeout_choice(rec.options, self.cfg.prompts.on_timeout)
                    settled = await self.inbox.settle(
                        rec.id, option_id=option, by="timeout", via="timeout", feedback=None, now=self.now(),
                        state=EXPIRED,
                    )
                    if settled:
                        log.info("request_expired", request_id=rec.id, option_id=option)
                nxt = await self.inbox.next_expiry()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("timer_failed")
                nxt = None
            wait = 30.0 if nxt is None else max(0.05, min(30.0, nxt - self.now()))
            await _wait_any(self.stop, self.wake_timer, wait)

    # -- lifecycle -------------------------------------------------------------
    async def start(self) -> None:
        await self.inbox.open()
        self.install_id = await self.inbox.get_kv("install_id") or ""
        if not self.install_id:
            self.install_id = uuid.uuid4().hex
            await self.inbox.set_kv("install_id", self.install_id)
        self.metrics.bind(self)

    async def run_matrix(self) -> None:
        """Log in, join, then sync and send until stopped."""
        await self.matrix.login()
        await self.matrix.join_room()
        self.ready = True
        tasks = [
            asyncio.create_task(self.matrix.sync_forever(self.on_room_event, self.stop), name="sync"),
            asyncio.create_task(self._worker("post", self.wake_post, self._post_step), name="post"),
            asyncio.create_task(self._worker("settle", self.wake_settle, self._settle_step), name="settle"),
            asyncio.create_task(self._worker("seed", self.wake_seed, self._seed_step), name="seed"),
            asyncio.create_task(self.notices.run(self.stop), name="notices"),
        ]
        try:
            done, _ = await asyncio.wait([*tasks, asyncio.create_task(self.stop.wait())],
                                         return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                if t in tasks and t.exception() is not None:
                    raise t.exception()  # type: ignore[misc]
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def close(self) -> None:
        await self.matrix.close()
        await self.inbox.close()


def _target(rec: Record) -> answers.Target:
    return answers.Target(
        request_id=rec.id,
        prompt_event_id=rec.prompt_event_id or None,
        options=[(str(o["optionId"]), str(o["name"])) for o in rec.options],
        digest=rec.digest,
        revision=rec.revision,
        pending=rec.pending,
    )


async def _wait(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        pass


async def _wait_any(stop: asyncio.Event, wake: asyncio.Event, seconds: float) -> None:
    waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(wake.wait())]
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()


def install_signal_handlers(stop: asyncio.Event) -> None:
    """SIGTERM and SIGINT stop the daemon cleanly."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
