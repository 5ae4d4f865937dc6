"""Keycap reactions seeded under prompts still pending a second after posting: one-tap answers on a phone.

Only the two answers most given are seeded on a permission prompt (:func:`seeded`: allow once and the
option that denies; a question's choices all are): every seed is an event each member's client downloads.
Once the prompt settles they stay (its edit shows the outcome); ``prompts.clear_reactions`` takes them back
(a redaction each). While the homeserver rate-limits the bot and its count leaves no reserve, a prompt gets
none (``keycaps_skipped``): its text says how to answer, and a reply by number works without them.

Background work: each reaction waits until no prompt or urgent edit is being sent
(the outbox's ``foreground_idle``) and the room is quiet (bot/room/quiet.py), so a burst
of seeding or clean-up (four events a prompt) never delays a prompt, an edit or a
quick answer. Deterministic txn ids, and the inbox keeps which keycap went where, so
a restart neither seeds twice nor leaves one behind.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import structlog

from bot import answers
from bot.inbox.store import Inbox
from bot.matrix import rate
from bot.matrix.client import Matrix, SendFailed, txn_id
from bot.prompts.options import MEANING_ORDER, by_meaning
from bot.room.quiet import Quiet
from bot.util.aio import sleep_unless_stopped, wait_first

log = structlog.get_logger("outbox")

SEED_DELAY = 1.0  # seconds a prompt waits for a quick answer before the bot seeds keycap reactions
SWEEP = 30.0  # seconds between clean-ups that look at every seeded reaction (the others look up settled ids)


def seeded(kinds: Sequence[str]) -> list[int]:
    """The 0-based shown positions whose keycaps are seeded: allow once (else allow always) and the option
    that denies (reject once, else reject always); every one when any option is another kind (a question's
    choices, an agent's own kinds: no answer is more likely than another)."""
    if any(k not in MEANING_ORDER for k in kinds):
        return list(range(min(len(kinds), len(answers.KEYCAPS))))
    out = []
    for pair in (MEANING_ORDER[:2], MEANING_ORDER[2:]):
        at = next((kinds.index(k) for k in pair if k in kinds), None)
        if at is not None and at < len(answers.KEYCAPS):
            out.append(at)
    return out


@dataclass(eq=False)
class Keycaps:
    """The ``seed`` and ``clear`` steps the outbox runs as workers."""

    inbox: Inbox
    matrix: Matrix
    seed_reactions: bool
    clear_reactions: bool
    stop: asyncio.Event
    now: Callable[[], float]
    quiet: Quiet
    foreground_idle: asyncio.Event  # no prompt and no edit being sent (the outbox sets it)
    wake_seed: asyncio.Event = field(init=False, default_factory=asyncio.Event)
    wake_clear: asyncio.Event = field(init=False, default_factory=asyncio.Event)
    # settled since the last clean-up: their keycaps are looked up by id
    _settled: set[str] = field(init=False, default_factory=set)
    _swept: float = field(init=False, default=float("-inf"))  # when the clean-up last looked at every seeded reaction

    def settled(self, request_id: str) -> None:
        """A request was settled (by this daemon or another): its keycaps go at the next clean-up."""
        self._settled.add(request_id)
        self.wake_clear.set()

    async def background_turn(self) -> bool:
        """Wait until no prompt or edit is being sent and the room is quiet; False when stopping."""
        while not self.stop.is_set():
            if not self.foreground_idle.is_set():
                await wait_first(self.stop, self.foreground_idle, seconds=1.0)
                continue
            busy = self.quiet.busy_for(self.now(), posting=False)
            if busy <= 0:
                return True
            await sleep_unless_stopped(self.stop, busy)
        return False

    async def clear_step(self) -> float:
        """Take back the keycaps seeded under settled prompts, one at a time, behind the foreground: those of
        the requests settled since the last step, by their ids (a settlement costs its own reactions, however
        many prompts are pending); every seeded reaction at start and every SWEEP seconds (what a restart or a
        missed change left behind). Only with ``prompts.clear_reactions``: by default they stay, the edit shows
        the outcome."""
        if not self.clear_reactions:
            self._settled.clear()  # nothing to take back: keep no ids
            return 3600.0
        ids, self._settled = self._settled, set()
        sweep = self.now() - self._swept >= SWEEP
        if sweep:
            self._swept = self.now()
        while todo := await self.inbox.reactions_to_clear(request_ids=None if sweep else sorted(ids)):
            for rid, key, ev in todo:
                if not await self.background_turn():
                    return 10.0
                owner = await self.inbox.get(rid)
                room = owner.room if owner is not None else "default"
                await self.matrix.redact(ev, txn_id("x", self.inbox.install_id, rid, key), reason="settled", room=room)
                await self.inbox.mark_reaction_redacted(rid, key)
        return 30.0

    async def seed_step(self) -> float:
        """Seed keycaps under prompts still pending SEED_DELAY after posting (quick answers need none)."""
        if not self.seed_reactions:
            return 3600.0
        cutoff = self.now() - SEED_DELAY
        for rec in await self.inbox.needing_seed(posted_before=cutoff, limit=8):
            if not self.matrix.spare_send("keycap_seed"):  # rate-limited: a reply by number needs none
                await self.inbox.mark_seeded(rec.id)
                log.info("keycaps_skipped", request_id=rec.id, reason="rate_limited")
                continue
            have = {k for k, _e, _r in await self.inbox.reactions(rec.id)}
            kinds = [str(o.get("kind")) if isinstance(o, Mapping) else "" for o in by_meaning(rec.options)]
            for i in seeded(kinds):
                key = answers.KEYCAPS[i]
                if key in have:
                    continue
                if not await self.background_turn():
                    return 10.0
                if (now_rec := await self.inbox.get(rec.id)) is None or not now_rec.pending:
                    break
                try:
                    relation = {"rel_type": "m.annotation", "event_id": rec.prompt_event_id, "key": key}
                    ev = await self.matrix.send({"m.relates_to": relation, "m.mentions": {}},
                                                txn_id("r", self.inbox.install_id, rec.id, str(i)), "m.reaction",
                                                room=rec.room, kind=rate.OPTIONAL)
                except SendFailed as e:
                    if not e.rate_limited:
                        raise
                    log.info("keycaps_skipped", request_id=rec.id, reason="rate_limited")
                    break
                await self.inbox.add_reaction(rec.id, key, ev)
            await self.inbox.mark_seeded(rec.id)
            self.settled(rec.id)  # it may have been answered meanwhile (the clean-up checks)
        nxt = await self.inbox.next_seed_due()
        return 10.0 if nxt is None else max(0.05, min(10.0, nxt + SEED_DELAY - self.now()))
