"""One proxy run: start the agent (on two fresh pipes), pump stdio both ways, and end when a side goes.

Two relay threads (:mod:`bot.door.relay`): the client's stdin to the agent, the agent's stdout to the client, each
through its line filter (:mod:`bot.acp.filters`) to the :class:`Proxy`. The run ends at the agent's exit, a signal (a
second one kills the agent), or a side that closes: pending requests are settled first (answered cancelled when the
client went, not when the agent did), the agent gets EOF and a grace period (:func:`wait_agent`), the run's session
rules end. An agent still running ``CLIENT_GONE_GRACE`` after the client closed stdin is stopped the same way (Claude
Code's ACP adapter does not exit at EOF: it would outlive the proxy's client for good).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from bot.door.proxy import DoorProxy
from bot.door.relay import FdSink, LineFilter, LineRelay, read_fd, relay_thread
from bot.util.aio import on_signals
from bot.util.discovery import agent_environment

log = structlog.get_logger("bot.acp")

CLIENT_GONE_GRACE = 30.0  # seconds an agent may run on after the client closed stdin (some never exit at EOF)


Filter = Callable[[Any, asyncio.AbstractEventLoop], LineFilter]  # a door's filter class: made with its proxy, the loop


async def spawn(cmd: list[str]) -> tuple[asyncio.subprocess.Process, int, int] | int:
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
    proc: asyncio.subprocess.Process, stop: asyncio.Event, grace: float | None,
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
            if not (await asyncio.wait({waiter}, timeout=3.0))[0]:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
        rc = await waiter
    finally:
        stopper.cancel()
    return 128 - rc if rc < 0 else rc


async def _drained(down: asyncio.Future[None], to_client: FdSink, quiet: float = 2.0) -> bool:
    """After the agent's exit, let its last output through: wait for the relay's EOF while the client
    still takes bytes; False when nothing moved for ``quiet`` seconds (a child may hold stdout open)."""
    moved = -1
    while moved != to_client.written:
        moved = to_client.written
        if (await asyncio.wait({down}, timeout=quiet))[0]:
            return True
    return False


async def run(proxy: DoorProxy, from_client: Filter, from_agent: Filter, name: str = "acp") -> int:
    """Run until the agent exits; its exit code (128+N for a signal). ``from_client`` and ``from_agent``: the door's
    line filters of each direction."""
    cfg = proxy.cfg
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    procs: list[asyncio.subprocess.Process] = []

    def on_signal(sig: signal.Signals) -> None:
        log.info("signal_received", signal=sig.name)
        if stop.is_set() and procs and procs[0].returncode is None:  # a second signal
            procs[0].kill()
        stop.set()

    on_signals(on_signal, (signal.SIGTERM, signal.SIGINT, signal.SIGHUP))
    spawned = await spawn(cfg.command)
    if isinstance(spawned, int):
        return spawned
    proc, agent_in, agent_out = spawned
    procs.append(proc)
    log.info("agent_started", pid=proc.pid, command=cfg.command, daemon=cfg.url, label=cfg.label,
             fallback=cfg.fallback, has_token=bool(cfg.token))
    proxy.to_agent = to_agent = FdSink(agent_in, owned=True)
    proxy.to_client = to_client = FdSink(cfg.stdout_fd, owned=False)
    big = proxy.note_oversize
    up = relay_thread(f"{name}-client-to-agent", lambda: read_fd(cfg.stdin_fd),
                      LineRelay(to_agent, from_client(proxy, loop), on_oversize=big), loop)
    down = relay_thread(f"{name}-agent-to-client", lambda: read_fd(agent_out),
                        LineRelay(to_client, from_agent(proxy, loop), on_oversize=big), loop,
                        after=lambda: os.close(agent_out))
    stopper = asyncio.ensure_future(stop.wait())
    exited = asyncio.ensure_future(proc.wait())
    waiting: set[asyncio.Future[Any]] = {up, down, stopper, exited}
    grace: float | None = None  # how long the agent may take to exit before it is terminated
    gone: asyncio.Future[Any] | None = None  # CLIENT_GONE_GRACE after the client's EOF
    try:
        while True:
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            waiting -= done
            if up in done:
                exc = up.exception()
                if exc is None:
                    log.info("client_closed_stdin")
                    await proxy.settle_all("client", answer=True)
                    await proxy.close_agent_stdin()
                    gone = asyncio.ensure_future(asyncio.sleep(CLIENT_GONE_GRACE))
                    waiting.add(gone)
                elif not isinstance(exc, ConnectionError):
                    log.error("client_relay_failed", error=repr(exc))
                    await proxy.close_agent_stdin()
                # a ConnectionError here: the agent's stdin is gone, it is on its way out
            if down in done:
                exc = down.exception()
                if exc is None:
                    # keep going: the client's EOF must still reach the agent, which may wait for it
                    log.info("agent_closed_stdout")
                    await proxy.settle_all("agent", answer=False)
                else:
                    if isinstance(exc, ConnectionError):
                        log.info("client_stopped_reading", message="closing the agent's stdin")
                    else:
                        log.error("agent_relay_failed", error=repr(exc))
                    await proxy.settle_all("client", answer=True)
                    await proxy.close_agent_stdin()
                    grace = 5.0
                    break
            if exited in done:
                if down in waiting and not await _drained(down, to_client):
                    log.info("agent_exited_stdout_open", message="its stdout is still open elsewhere; leaving it")
                await proxy.settle_all("agent", answer=False)
                break
            if stopper in done:
                await proxy.settle_all("client", answer=True)
                grace = 0.0
                break
            if gone in done:  # nobody is left to talk to it: never an orphan
                log.info("agent_outlived_client", after_s=CLIENT_GONE_GRACE, pid=proc.pid)
                grace = 0.0
                break
        rc = await wait_agent(proc, stop, grace, proxy.close_agent_stdin)
    finally:
        for t in (stopper, exited, gone):
            if t is not None:
                t.cancel()
        await proxy.finish()
    log.info("agent_exited", code=rc)
    return rc
