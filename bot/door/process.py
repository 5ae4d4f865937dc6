"""Running the agent process: start it on two fresh pipes, wait for it, stop it (then kill it)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable

import structlog

from bot.util.discovery import agent_environment

log = structlog.get_logger("bot.acp")

Spawned = tuple[asyncio.subprocess.Process, int, int]


async def spawn(cmd: list[str]) -> Spawned | int:
    """Start ``cmd``: (process, its stdin's write end, its stdout's read end), or an exit code (127/126)."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    try:
        # the agent is untrusted: no PERMISSION_BOT_* variable (the token above all) reaches it
        proc = await asyncio.create_subprocess_exec(*cmd, stdin=in_r, stdout=out_w, env=agent_environment(os.environ))
    except OSError as e:
        for fd in (in_r, in_w, out_r, out_w):
            os.close(fd)
        if isinstance(e, FileNotFoundError):
            log.error("agent_command_not_found", command=cmd[0])
            return 127
        log.error("agent_start_failed", command=cmd[0], error=str(e))
        return 126
    os.close(in_r)
    os.close(out_w)
    return proc, in_w, out_r


async def wait_agent(
    proc: asyncio.subprocess.Process,
    stop: asyncio.Event,
    grace: float | None,
    close_stdin: Callable[[float], Awaitable[None]],
) -> int:
    """Wait for the agent to exit; after ``grace`` seconds or a stop signal, terminate it (then kill).

    Its exit code, 128+N for a signal.
    """
    waiter = asyncio.ensure_future(proc.wait())
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({waiter, stopper}, timeout=grace, return_when=asyncio.FIRST_COMPLETED)
        if not waiter.done():
            await close_stdin(0.5)
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            done, _ = await asyncio.wait({waiter}, timeout=3.0)
            if not done:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
        rc = await waiter
    finally:
        stopper.cancel()
    return 128 - rc if rc < 0 else rc
