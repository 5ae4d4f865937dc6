"""The one back-off policy: the Matrix side, the ACP proxy and the webhooks all pace retries with it.

Exponential: the first pause is ``first``, each one after doubles, up to ``cap``; each pause is
scaled by a random factor between ``jitter``'s two ends (``NO_JITTER`` for none); ``reset`` after
a success. :class:`KeyedBackoff` keeps one per key, so one failing record waits its turn without
holding up the others. Callers pass their own numbers; this module knows no side and does no I/O.
"""

from __future__ import annotations

import random
from collections.abc import Callable

JITTER = (0.8, 1.2)  # ±20 %
NO_JITTER = (1.0, 1.0)


class Backoff:
    """Exponential back-off with jitter: ``first`` doubling up to ``cap``; ``reset`` after a success."""

    def __init__(self, first: float, cap: float, jitter: tuple[float, float] = JITTER) -> None:
        self.first = first
        self.cap = cap
        self.jitter = jitter
        self.base = first  # the next pause, before jitter

    def delay(self) -> float:
        """The pause to sleep now (jittered); the one after doubles, up to the cap."""
        low, high = self.jitter
        d = self.base * (low + (high - low) * random.random())
        self.base = min(self.base * 2, self.cap)
        return d

    def reset(self) -> None:
        self.base = self.first


class KeyedBackoff:
    """A back-off per key, each made by ``make`` at its key's first failure and dropped at its success."""

    def __init__(self, make: Callable[[], Backoff]) -> None:
        self._make = make
        self._due: dict[str, tuple[float, Backoff]] = {}

    def ready(self, key: str, now: float) -> bool:
        due = self._due.get(key)
        return due is None or due[0] <= now

    def failed(self, key: str, now: float) -> float:
        """Note a failure; returns the delay before ``key`` is ready again."""
        due = self._due.get(key)
        backoff = self._make() if due is None else due[1]
        delay = backoff.delay()
        self._due[key] = (now + delay, backoff)
        return delay

    def ok(self, key: str) -> None:
        self._due.pop(key, None)

    def waiting(self) -> int:
        return len(self._due)

    def next_in(self, now: float, default: float) -> float:
        """Seconds until the first key is ready again (``default`` when none waits, at most that)."""
        if not self._due:
            return default
        return max(0.05, min(default, min(t for t, _ in self._due.values()) - now))
