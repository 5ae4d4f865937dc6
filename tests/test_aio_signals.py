"""bot/util/aio.on_signals: the one place signal handlers are installed (and removed)."""

from __future__ import annotations

import asyncio
import os
import signal

from bot.util.aio import on_signals


async def test_handler_gets_the_signal_and_remove_restores() -> None:
    got: list[signal.Signals] = []
    seen = asyncio.Event()

    def handler(sig: signal.Signals) -> None:
        got.append(sig)
        seen.set()

    remove = on_signals(handler, (signal.SIGUSR1,))
    try:
        os.kill(os.getpid(), signal.SIGUSR1)
        await asyncio.wait_for(seen.wait(), 5)
    finally:
        remove()
    assert got == [signal.SIGUSR1]
    assert not asyncio.get_running_loop().remove_signal_handler(signal.SIGUSR1)  # nothing left installed
