"""The bot's sends through the homeserver's message limit: one gate for the account (every station room).

Unlimited (no refusal yet, or the last limit over) a send goes at once. Once the homeserver refuses one for
rate, :mod:`bot.matrix.rate` decides which waiting send goes next and when; the refused send waits again in its
place. One ``matrix_rate_limited_started`` line when a limit starts and one ``matrix_rate_limited_ended`` when
it ends, with what it cost; :meth:`RateGate.status` is the same for ``/healthz``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from typing import Any

import structlog

from bot.matrix.rate import BACKGROUND, KINDS, REMEDY, Bucket, Waiting

log = structlog.get_logger("matrix")

HINT = "the homeserver rate-limits the bot's account: prompts and answered edits go first, keycaps wait or are left out"


class RateGate:
    """Which send goes when, under the homeserver's message limit."""

    def __init__(self, bucket: Bucket | None = None) -> None:
        self.now = time.monotonic
        self.wall = time.time  # a request's arrival
        self.bucket = bucket or Bucket()
        self._seq = itertools.count()
        self._wake: dict[int, asyncio.Event] = {}
        self._timer: asyncio.TimerHandle | None = None
        self.episodes = 0  # limits so far
        self.refusals = 0  # refusals for rate so far
        self.last: dict[str, Any] | None = None  # the last limit's figures, once over

    async def turn(self, kind: str = BACKGROUND, order: float | None = None) -> None:
        """Wait until a send of ``kind`` (rate.PROMPT, EDIT or BACKGROUND) may go; ``order``: its request's
        arrival (wall time). At once while the account is not limited."""
        b = self.bucket
        if not b.limited and not b.waiting:
            return
        assert kind in KINDS
        me = Waiting(kind, self.wall() if order is None else order, next(self._seq), self.now())
        wake = self._wake[me.seq] = asyncio.Event()
        b.waiting.append(me)
        try:
            while True:
                now = self.now()
                chosen = b.pick(now)
                if chosen is me:
                    b.take(me, now)
                    return
                if chosen is not None:  # another one's turn: let it know
                    self._wake[chosen.seq].set()
                wake.clear()
                with contextlib.suppress(TimeoutError):  # whoever wakes routes the turn; none sleeps for good
                    await asyncio.wait_for(wake.wait(), b.next_in(now) if chosen is None else 1.0)
        finally:
            del self._wake[me.seq]
            if me in b.waiting:  # cancelled while waiting
                b.waiting.remove(me)
            self._kick()

    def refused(self, retry_after: float) -> None:
        """The homeserver refused a send for rate; the next one is allowed in ``retry_after`` seconds."""
        self.refusals += 1
        if self.bucket.refused(self.now(), retry_after):
            self.episodes += 1
            log.warning("matrix_rate_limited_started", retry_in=round(retry_after, 1), hint=HINT, remedy=REMEDY)
        self._kick()
        self._arm()

    def spare(self) -> bool:
        """May an optional send (a keycap seed) be spent now."""
        return self.bucket.spare(self.now())

    def status(self) -> dict[str, Any]:
        """For ``/healthz``: limited now (with the figures so far), the limits and refusals seen, the remedy."""
        self._check_end()
        ep = self.bucket.episode
        out: dict[str, Any] = {"limited": ep is not None, "limits": self.episodes, "refusals": self.refusals}
        if ep is not None:
            out["now"] = {**ep.figures(self.now()), "waiting": len(self.bucket.waiting)}
        if self.last is not None:
            out["last"] = self.last
        if self.episodes:
            out["remedy"] = REMEDY
        return out

    def _kick(self) -> None:
        """Wake the send whose turn it is now, if any (the others sleep until the bucket fills)."""
        b = self.bucket
        chosen = b.pick(self.now()) if b.waiting else None
        target = chosen or min(b.waiting, key=lambda w: w.seq, default=None)
        if target is not None and target.seq in self._wake:
            self._wake[target.seq].set()
        if not b.waiting:
            self._arm()

    def _arm(self) -> None:
        """Look again when the limit may end (the bucket full), to say so in the log."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        end = self.bucket.end_in(self.now())
        if end is not None:
            self._timer = asyncio.get_running_loop().call_later(end + 0.05, self._check_end)

    def _check_end(self) -> None:
        ep = self.bucket.ended(self.now())
        if ep is None:
            if self.bucket.limited and not self.bucket.waiting:
                self._arm()
            return
        self.last = {**ep.figures(self.now()), "ended_at": round(self.wall(), 3)}
        log.info("matrix_rate_limited_ended", **{k: v for k, v in self.last.items() if k != "ended_at"}, remedy=REMEDY)
