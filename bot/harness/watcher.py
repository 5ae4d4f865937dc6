"""Watch one harness's permission inbox (seed 002) and answer it from the room.

Each step: read what the harness holds; store new requests in the inbox (linked, one transaction);
ask again, as a new revision, any whose record changed since it was shown (the old prompt withdrawn,
its answer never sent); withdraw inbox requests the harness no longer holds (answered elsewhere: its
CLI, a rule); send settled answers back with the exact ``optionId``, once, each only after reading
the record again and finding it unchanged. The harness polled every ``poll`` and at
once when the inbox settles one of its requests; on failure the step is retried with back-off
(:mod:`bot.util.backoff`: twice the poll, doubling up to 60 s) and the state is said in ``health()``.
Everything durable is in the inbox, so restarts lose nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

import structlog

from bot.config import HarnessConfig
from bot.events.states import Via
from bot.events.timestamps import iso_ms
from bot.harness import mapping as M
from bot.harness.client import Client, DiscoveryError, Endpoint, HarnessDown, TokenRefused, discover, token_taken
from bot.inbox import links as L
from bot.inbox.db.errors import DATABASE_ERRORS
from bot.inbox.db.fence import Deposed
from bot.inbox.links import Link, Links, Squatted
from bot.inbox.record import CANCELLED, Record, Settlement
from bot.inbox.store import Inbox
from bot.util.aio import wait_first
from bot.util.backoff import NO_JITTER, Backoff
from bot.util.outage import Outage

log = structlog.get_logger("harness")

MAX_BACKOFF = 60.0
STARTING, OK, UNREACHABLE, TOKEN_REFUSED, MISCONFIGURED = (
    "starting", "ok", "unreachable", "token_refused", "misconfigured",
)


class Watcher:
    """One ``[[harnesses]]`` entry, watched until ``stop``."""

    def __init__(self, cfg: HarnessConfig, inbox: Inbox, *, now: Callable[[], float], timeout: float,
                 env: Mapping[str, str], after_new: Callable[[Record], Awaitable[Record]] | None = None,
                 room: str = "default") -> None:
        self.cfg = cfg
        self.room = room  # the station room its requests go to ([[rooms]] harnesses)
        self.name = cfg.name
        self.inbox = inbox
        self.links = Links(inbox)
        self.now = now
        self.timeout = timeout
        self.env = env
        self.after_new = after_new
        self.wake = asyncio.Event()
        self.by = f"harness:{cfg.name}"
        self.state, self.error, self.since = STARTING, "", now()
        self.failures = 0
        self._token_ok = False
        self._endpoint: Endpoint | None = None
        self._refused: set[str] = set()  # held ids already logged as not takeable

    # -- health ----------------------------------------------------------------
    def _set(self, state: str, error: str = "") -> None:
        if state != self.state or error != self.error:
            log.info("harness_state", harness=self.name, state=state, error=error or None)
            self.state, self.error, self.since = state, error, self.now()

    def health(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.state == OK, "state": self.state, "error": self.error or None,
                "since": iso_ms(self.since), "failures": self.failures}

    # -- the loop ----------------------------------------------------------------
    async def run(self, client: Client, stop: asyncio.Event) -> None:
        cap = min(MAX_BACKOFF, self.cfg.poll * 2**10)  # after a failure: twice the poll, doubling to this
        backoff = Backoff(min(cap, self.cfg.poll * 2), cap, NO_JITTER)
        outage = Outage(log, "harness_state_unavailable", "harness_state_back", harness=self.name)
        while not stop.is_set():
            self.wake.clear()
            wait = self.cfg.poll
            try:
                await self.step(client)
                self.failures = 0
                backoff.reset()
                outage.ok()
            except (asyncio.CancelledError, Deposed):  # Deposed: the term is over (the supervisor demotes)
                raise
            except DATABASE_ERRORS as e:  # the state away for now: the same step again soon after
                wait = backoff.delay()
                outage.failed(e, wait)
            except Exception as e:
                if isinstance(e, HarnessDown | TokenRefused | DiscoveryError):
                    self._token_ok = False
                    kind = {TokenRefused: TOKEN_REFUSED, DiscoveryError: MISCONFIGURED}.get(type(e), UNREACHABLE)
                    self._set(kind, str(e))
                else:
                    log.exception("harness_step_failed", harness=self.name)
                    self._set(UNREACHABLE, type(e).__name__)
                self.failures += 1
                wait = backoff.delay()
            await wait_first(stop, self.wake, seconds=wait)

    async def step(self, client: Client) -> None:
        ep = discover(self.cfg, self.env)
        if ep != self._endpoint:  # found anew (a restarted harness wrote a new runtime.json): check again
            self._endpoint, self._token_ok = ep, False
        held = await client.held(ep)
        current = _index(held)
        await self._take(held)  # taken even while the token is refused: answers wait in the inbox
        for link, rec in await self.links.open(self.name):
            now_held = current.get((link.harness_id, link.fingerprint))
            if now_held is not None and not M.same_request(now_held, rec.params):
                await self._ask_again(link, rec, now_held)
        await self._withdraw(set(current))
        if not self._token_ok:
            status = await client.check_token(ep)
            if not token_taken(status):
                log.warning("harness_token_unconfirmed", harness=self.name, status=status)
            self._token_ok = True
        self._set(OK)
        await self._deliver(client, ep)

    # -- held -> inbox -------------------------------------------------------------
    async def _take(self, held: list[Any]) -> None:
        ids = [r["id"] for r in held if isinstance(r, dict) and isinstance(r.get("id"), str)]
        known = await self.links.known(self.name, ids)
        for r in held:
            try:
                h = M.to_submission(self.name, r)
            except M.RecordError as e:
                rid = str(r.get("id")) if isinstance(r, dict) else "?"
                if rid not in self._refused:
                    self._refused.add(rid)
                    log.warning("harness_record_refused", harness=self.name, harness_id=rid[:200], reason=str(e))
                continue
            if (h.harness_id, h.fingerprint) in known:
                continue
            try:
                rec, created = await self.links.submit(
                    self.name, h.harness_id, h.fingerprint, h.submission, self.now(), self.timeout,
                    hold_post=self.after_new is not None, room=self.room)  # hold_post: after_new releases it
            except Squatted as e:
                if h.harness_id not in self._refused:
                    self._refused.add(h.harness_id)
                    log.warning("harness_record_refused", harness=self.name, harness_id=h.harness_id, reason=str(e))
                continue
            if created:
                log.info("harness_request_taken", harness=self.name, harness_id=h.harness_id, request_id=rec.id)
                if self.after_new is not None:
                    await self.after_new(rec)

    async def _ask_again(self, link: Link, rec: Record, now_held: Any) -> None:
        """The harness changed a request after it was shown: withdraw its prompt (an answer to it is never
        sent) and ask the new content as the next revision of the same tool call."""
        try:
            h = M.to_submission(self.name, now_held)
            sub = replace(h.submission, key=M.revision_key(h.submission.key, rec))
            done = await self.links.revise(link, sub, self.now(), self.timeout, by=self.by, note=M.changed_note,
                                           hold_post=self.after_new is not None)
        except (M.RecordError, Squatted) as e:  # the new content cannot be asked: the old is withdrawn all the same
            log.warning("harness_record_refused", harness=self.name, harness_id=link.harness_id, reason=str(e))
            await self._close_changed(rec)
            return
        if done is None:
            return
        old, new = done
        log.info("harness_request_changed", harness=self.name, harness_id=link.harness_id, request_id=old.id,
                 new_request_id=new.id, revision=new.revision)
        if self.after_new is not None:
            await self.after_new(new)

    async def _close_changed(self, rec: Record) -> None:
        """Withdraw a changed request that cannot be asked again (pending: cancelled; answered: not sent)."""
        settled = rec.pending and await self.inbox.settle(
            rec.id, Settlement(None, self.by, Via.CANCEL, self.now(), M.CHANGED, state=CANCELLED))
        if settled:
            await self.links.set_delivery(rec.id, L.REFUSED, self.now())
            return
        rec = await self.inbox.get(rec.id) or rec  # answered meanwhile: that answer is not sent
        await self._amend(rec, M.elsewhere_note(rec, M.CHANGED), L.REFUSED)

    async def _withdraw(self, current: set[tuple[str, str]]) -> None:
        """Pending inbox requests the harness let go of: settled cancelled, "answered elsewhere"."""
        for link in await self.links.pending(self.name):
            if (link.harness_id, link.fingerprint) in current:
                continue
            rec = await self.inbox.settle(
                link.request_id, Settlement(None, self.by, Via.CANCEL, self.now(), M.ELSEWHERE, state=CANCELLED))
            if rec is not None:
                await self.links.set_delivery(link.request_id, L.WITHDRAWN, self.now())
                log.info("harness_request_withdrawn", harness=self.name, harness_id=link.harness_id,
                         request_id=link.request_id)

    # -- inbox -> harness ----------------------------------------------------------
    async def _deliver(self, client: Client, ep: Endpoint) -> None:
        for link, rec in await self.links.undelivered(self.name):
            # Read the record again right before sending: seed 002's POST carries no digest, so this is the
            # last point where a change can be seen (a change after it is answered, see README).
            now_held = _index(await client.held(ep)).get((link.harness_id, link.fingerprint))
            if now_held is None:
                await self._not_held(link, rec)
                continue
            if not M.same_request(now_held, rec.params):  # never answer something other than what was shown
                await self._ask_again(link, rec, now_held)
                continue
            earlier = link.delivery == L.SENDING  # an earlier attempt may have landed
            await self.links.set_delivery(rec.id, L.SENDING, self.now(), attempt=True)
            body = M.decision_body(rec)
            try:
                status = await client.decide(ep, link.harness_id, body)
            except TokenRefused:
                await self.links.set_delivery(rec.id, L.SENDING if earlier else None, self.now())
                raise
            if 200 <= status < 300 or (status == 404 and earlier):
                await self.links.set_delivery(rec.id, L.DELIVERED, self.now())
                log.info("harness_answer_delivered", harness=self.name, harness_id=link.harness_id,
                         request_id=rec.id, option_id=body.get("optionId"), assumed=status == 404)
            elif status == 404:
                await self._amend(rec, M.elsewhere_note(rec), L.ELSEWHERE)
            else:
                why = f"the harness refused the answer (HTTP {status}{': no fitting option' if status == 409 else ''})"
                await self._amend(rec, M.elsewhere_note(rec, why), L.REFUSED)

    async def _not_held(self, link: Link, rec: Record) -> None:
        o = rec.outcome
        if link.delivery == L.SENDING:
            await self.links.set_delivery(rec.id, L.DELIVERED, self.now())
            log.info("harness_answer_delivered", harness=self.name, harness_id=link.harness_id,
                     request_id=rec.id, assumed=True)
        elif o is not None and o.answered_by == self.by and o.via == "cancel":
            await self.links.set_delivery(rec.id, L.WITHDRAWN, self.now())
        else:
            await self._amend(rec, M.elsewhere_note(rec), L.ELSEWHERE)

    async def _amend(self, rec: Record, note: str, delivery: str) -> None:
        await self.links.answered_elsewhere(rec.id, self.by, note, delivery, self.now())  # listeners hear it
        log.info("harness_answer_not_delivered", harness=self.name, request_id=rec.id, delivery=delivery)


def _index(held: list[Any]) -> dict[tuple[str, str], Any]:
    """The held records by (id, fingerprint)."""
    return {(r["id"], M.fingerprint(r)): r for r in held if isinstance(r, dict) and isinstance(r.get("id"), str)}
