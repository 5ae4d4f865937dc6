"""The Matrix side's one retry policy: what counts as transient, and how long to back off.

Transient: the network (``OSError``, ``TimeoutError``, ``aiohttp.ClientError``, told by
type) and, where a caller says so, the local disk. Back-off doubles from 0.5 s to 30 s,
with ±20 % jitter, and resets after a success.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import structlog

log = structlog.get_logger("matrix")

NETWORK_ERRORS: tuple[type[BaseException], ...] = (OSError, TimeoutError, aiohttp.ClientError)
STORAGE_ERRORS: tuple[type[BaseException], ...] = (sqlite3.Error, OSError)

FIRST_DELAY = 0.5
MAX_DELAY = 30.0


def describe(e: BaseException) -> str:
    """``ServerDisconnectedError: Server disconnected`` (the type alone when the text is empty)."""
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


class Backoff:
    """Exponential back-off with jitter; ``reset`` after a success."""

    def __init__(self, first: float | None = None, cap: float | None = None) -> None:
        self.first = FIRST_DELAY if first is None else first
        self.cap = MAX_DELAY if cap is None else cap
        self.delay = self.first

    def next(self) -> float:
        """The delay to sleep now (jittered); the one after doubles, up to the cap."""
        d = self.delay * (0.8 + 0.4 * random.random())
        self.delay = min(self.delay * 2, self.cap)
        return d

    def reset(self) -> None:
        self.delay = self.first


class KeyedBackoff:
    """A back-off per key: one failing record waits its turn without holding up the others."""

    def __init__(self) -> None:
        self._due: dict[str, tuple[float, Backoff]] = {}

    def ready(self, key: str, now: float) -> bool:
        due = self._due.get(key)
        return due is None or due[0] <= now

    def failed(self, key: str, now: float) -> float:
        """Note a failure; returns the delay before ``key`` is ready again."""
        backoff = self._due.get(key, (0.0, Backoff()))[1]
        delay = backoff.next()
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


async def retry(what: str, call: Callable[[], Awaitable[Any]], attempts: int = 0) -> Any:
    """Call until it returns; network errors back off; ``attempts`` 0 means forever.

    A stop is a cancellation of the caller's task: the sleeps here never hold it up.
    """
    backoff = Backoff()
    n = 0
    while True:
        n += 1
        try:
            return await call()
        except NETWORK_ERRORS as e:
            if attempts and n >= attempts:
                raise
            delay = backoff.next()
            log.warning("matrix_unreachable", during=what, error=describe(e), retry_in=round(delay, 2))
        await asyncio.sleep(delay)
