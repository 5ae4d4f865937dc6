"""The homeserver's message limit as the bot counts it, and which waiting send goes next (pure: ``now`` passed in).

Until the homeserver refuses a send for rate (429 ``M_LIMIT_EXCEEDED``) every send goes at once, as always.
From the first refusal on, the account is *limited*: a token bucket mirrors Synapse's default ``rc_message``
(``PER_SECOND`` events a second, ``BURST`` at once), set by each refusal's ``retry_after_ms``, and the sends
wait for its tokens, the ones a person waits for first:

- ``PROMPT`` and ``EDIT`` (a new prompt, the edit that shows an answer) by the order their requests came;
- an ``EDIT`` leaves the last token to a prompt that may come, for ``EDIT_HOLD`` seconds at most (at a pace
  right at the limit a drained bucket never refills: the prompts would stay a token late for good);
- ``BACKGROUND`` (keycap clean-up, notices, decorations) only while ``RESERVE`` tokens stay for the others,
  or, with nothing else waiting, after ``BACKGROUND_MAX_WAIT``; ``OPTIONAL`` (a keycap seed) the same, but
  its sender leaves it out rather than keep it waiting (:meth:`Bucket.spare`).

The limit ends once the bucket is full again with nothing waiting (an admin may have exempted the account:
the next refusal starts it again). :class:`Episode` is what one limit cost, for the log and ``/healthz``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PER_SECOND = 0.2  # Synapse's default rc_message
BURST = 10.0
RESERVE = 5.0  # tokens a background send leaves to prompts and edits
EDIT_HOLD = 6.0  # seconds an edit leaves the last token to the next prompt, at most
BACKGROUND_MAX_WAIT = 60.0  # seconds a background send waits for the reserve, at most
PROMPT, EDIT, BACKGROUND = "prompt", "edit", "background"
OPTIONAL = "optional"  # background that is left out rather than kept waiting (a keycap seed)
KINDS = (PROMPT, EDIT, BACKGROUND, OPTIONAL)
REMEDY = ("an admin can exempt the bot's account: POST /_synapse/admin/v1/users/<bot user id>/override_ratelimit "
          'with {"messages_per_second": 0, "burst_count": 0}, or raise the homeserver\'s rc_message')


@dataclass
class Waiting:
    """One send waiting for its turn."""

    kind: str
    order: float  # its request's arrival (wall time), or when it began to wait
    seq: int  # ties, and sends of no request: first come first
    since: float  # when it began to wait (the gate's clock)


@dataclass
class Episode:
    """One stretch of being rate-limited: when it began, the refusals, and what the waits cost."""

    started: float
    refusals: int = 0
    delayed: int = 0  # sends that had to wait
    delay_total: float = 0.0
    delay_max: float = 0.0
    skipped: dict[str, int] = field(default_factory=dict)  # sends left out while limited (keycap seeds)

    def waited(self, seconds: float) -> None:
        if seconds > 0.05:
            self.delayed += 1
            self.delay_total += seconds
            self.delay_max = max(self.delay_max, seconds)

    def figures(self, now: float) -> dict[str, float | int]:
        return {
            "seconds": round(now - self.started, 1),
            "refusals": self.refusals,
            "sends_delayed": self.delayed,
            "delay_total_s": round(self.delay_total, 1),
            "delay_max_s": round(self.delay_max, 1),
            **{f"skipped_{k}": n for k, n in sorted(self.skipped.items())},
        }


class Bucket:
    """The mirror of the homeserver's limit, and the sends waiting on it."""

    def __init__(self, per_second: float = PER_SECOND, burst: float = BURST) -> None:
        self.rate = per_second
        self.burst = burst
        self.episode: Episode | None = None  # set while limited
        self._tokens = burst
        self._at = 0.0
        self.waiting: list[Waiting] = []

    @property
    def limited(self) -> bool:
        return self.episode is not None

    def level(self, now: float) -> float:
        """Tokens in the bucket now (may be below zero after a long ``retry_after``)."""
        return min(self.burst, self._tokens + (now - self._at) * self.rate)

    def refused(self, now: float, retry_after: float) -> bool:
        """The homeserver refused a send for rate, the next allowed in ``retry_after`` seconds; True when this
        starts a limit."""
        started = self.episode is None
        self.episode = self.episode or Episode(now)
        self.episode.refusals += 1
        base = 1.0 if started else self.level(now)
        self._tokens, self._at = min(base, 1.0 - max(0.0, retry_after) * self.rate), now
        return started

    def _need(self, w: Waiting, now: float) -> float:
        """Tokens the bucket must hold for ``w`` to go now."""
        if w.kind in (BACKGROUND, OPTIONAL):
            alone = all(o.kind in (BACKGROUND, OPTIONAL) for o in self.waiting)
            return 1.0 if alone and now - w.since >= BACKGROUND_MAX_WAIT else 1.0 + RESERVE
        if w.kind == EDIT and now - w.since < EDIT_HOLD:
            return 2.0
        return 1.0

    @staticmethod
    def _rank(w: Waiting) -> tuple[int, float, int]:
        return (1 if w.kind in (BACKGROUND, OPTIONAL) else 0, w.order, w.seq)

    def pick(self, now: float) -> Waiting | None:
        """The waiting send that may go now (first by rank among those the bucket allows); None: none yet."""
        level = self.level(now)
        ready = [w for w in self.waiting if not self.limited or level >= self._need(w, now)]
        return min(ready, key=self._rank, default=None)

    def next_in(self, now: float) -> float:
        """Seconds until :meth:`pick` may find one (the bucket filling, a hold or a wait running out)."""
        if not self.waiting or not self.limited:
            return 0.0
        level = self.level(now)
        out = []
        for w in self.waiting:
            out.append((self._need(w, now) - level) / self.rate)
            if w.kind == EDIT:
                out.append(w.since + EDIT_HOLD - now)
            if w.kind in (BACKGROUND, OPTIONAL):
                out.append(w.since + BACKGROUND_MAX_WAIT - now)
        return max(0.01, min((x for x in out if x > 0), default=0.01))

    def take(self, w: Waiting, now: float) -> None:
        """``w`` goes now: one token spent (counted while limited), its wait noted."""
        self.waiting.remove(w)
        if self.episode is not None:
            self._tokens, self._at = self.level(now) - 1.0, now
            self.episode.waited(now - w.since)

    def skipped(self, what: str) -> None:
        """A send left out while limited (counted in the episode)."""
        if self.episode is not None:
            self.episode.skipped[what] = self.episode.skipped.get(what, 0) + 1

    def spare(self, now: float) -> bool:
        """May an optional send (a keycap seed) be spent now: not limited, or the reserve is there."""
        return not self.limited or (not self.waiting and self.level(now) >= 1.0 + RESERVE)

    def end_in(self, now: float) -> float | None:
        """Seconds until the limit may end (the bucket full, nothing waiting); None when not limited."""
        if self.episode is None:
            return None
        return max(0.0, (self.burst - self.level(now)) / self.rate)

    def ended(self, now: float) -> Episode | None:
        """The episode, when the limit ends now (the bucket full again with nothing waiting); else None."""
        if self.episode is None or self.waiting or self.level(now) < self.burst:
            return None
        ep, self.episode = self.episode, None
        return ep
