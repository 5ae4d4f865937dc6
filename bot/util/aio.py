"""Small asyncio helpers: waits shared by the daemon's loops, and signal handlers."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


async def sleep_unless_stopped(stop: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds``, or less when ``stop`` is set."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


async def wait_first(*events: asyncio.Event, seconds: float | None = None) -> None:
    """Wait until any of ``events`` is set (or ``seconds`` pass)."""
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()


def on_signals(
    handler: Callable[[signal.Signals], object], sigs: Iterable[signal.Signals] = (signal.SIGTERM, signal.SIGINT)
) -> Callable[[], None]:
    """Call ``handler(sig)`` from the running loop on each of ``sigs`` (where the platform allows it);
    returns what removes them again. The one place signal handlers are installed."""
    loop = asyncio.get_running_loop()
    added: list[signal.Signals] = []
    for sig in sigs:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, handler, sig)
            added.append(sig)

    def remove() -> None:
        for sig in added:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)

    return remove


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on uvloop where it is installed (each hop the daemon and the proxy make, an HTTP
    answer, a thread's result, a pipe's line, costs less there); the standard loop otherwise."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)
