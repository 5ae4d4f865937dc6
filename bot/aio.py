"""Small asyncio waits shared by the daemon's loops."""

from __future__ import annotations

import asyncio


async def sleep_unless_stopped(stop: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds``, or less when ``stop`` is set."""
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        pass


async def wait_any(stop: asyncio.Event, wake: asyncio.Event, seconds: float) -> None:
    """Wait until ``stop`` or ``wake`` is set, or ``seconds`` pass."""
    waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(wake.wait())]
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()
