"""One loop for a leader's timed worker: tick, sleep until woken or its wait is up, survive a failed tick."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from bot.inbox.db.fence import Deposed
from bot.util.aio import wait_first

log = structlog.get_logger("daemon")

RETRY = 5.0  # seconds before a failed tick is tried again


async def tick_loop(
    tick: Callable[[], Awaitable[float]], wake: asyncio.Event, stop: asyncio.Event, failed: str
) -> None:
    """Run ``tick`` (it returns how long to wait) until ``stop``; ``wake`` cuts a wait short. A send or the
    database failing is logged as ``failed`` and tried again shortly; a deposed leader stops."""
    while not stop.is_set():
        wake.clear()
        try:
            wait = await tick()
        except (asyncio.CancelledError, Deposed):
            raise
        except Exception as e:
            log.warning(failed, error=str(e)[:200])
            wait = RETRY
        await wait_first(stop, wake, seconds=wait)
