"""One proxy run: start the agent, pump stdio both ways, and end when a side goes.

Two relay threads (:mod:`bot.door.relay`): the client's stdin to the agent, the agent's stdout to
the client, each through its line filter (:mod:`bot.acp.filters`) to the :class:`Proxy`. The run
ends at the agent's exit, a signal (a second one kills the agent), or a side that closes: pending
requests are settled first (answered cancelled when the client went, not when the agent did), the
agent gets EOF and a grace period (:func:`bot.door.process.wait_agent`), the run's session rules end.
An agent still running ``CLIENT_GONE_GRACE`` after the client closed stdin is stopped the same way
(Claude Code's ACP adapter does not exit at EOF: it would outlive the proxy's client for good).
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from typing import Any, Protocol

import structlog

from bot.door.config import ProxyConfig
from bot.door.process import spawn, wait_agent
from bot.door.relay import FdSink, LineFilter, LineRelay, read_fd, relay_thread
from bot.util.aio import on_signals

log = structlog.get_logger("bot.acp")

CLIENT_GONE_GRACE = 30.0  # seconds an agent may run on after the client closed stdin (some never exit at EOF)


class Door(Protocol):
    """What the run needs of a door's proxy (:class:`bot.acp.proxy.Proxy`, :class:`bot.codex.proxy.Proxy`)."""

    cfg: ProxyConfig
    to_agent: FdSink | None
    to_client: FdSink | None

    def note_oversize(self, size: int) -> None: ...

    async def settle_all(self, by: str, *, answer: bool) -> None: ...

    async def close_agent_stdin(self, wait: float = 2.0) -> None: ...

    async def finish(self) -> None: ...


Filters = Callable[[asyncio.AbstractEventLoop], tuple[LineFilter, LineFilter]]  # (from the client, from the agent)


async def _drained(down: asyncio.Future[None], to_client: FdSink, quiet: float = 2.0) -> bool:
    """After the agent's exit, let its last output through: wait for the relay's EOF while the client
    still takes bytes; False when nothing moved for ``quiet`` seconds (a child may hold stdout open)."""
    moved = -1
    while moved != to_client.written:
        moved = to_client.written
        if (await asyncio.wait({down}, timeout=quiet))[0]:
            return True
    return False


async def run(proxy: Door, filters: Filters, name: str = "acp") -> int:
    """Run until the agent exits; its exit code (128+N for a signal)."""
    cfg = proxy.cfg
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    procs: list[asyncio.subprocess.Process] = []
    signals = 0

    def on_signal(signame: str) -> None:
        nonlocal signals
        signals += 1
        log.info("signal_received", signal=signame)
        stop.set()
        if signals > 1 and procs and procs[0].returncode is None:
            procs[0].kill()

    on_signals(lambda sig: on_signal(sig.name), (signal.SIGTERM, signal.SIGINT, signal.SIGHUP))
    spawned = await spawn(cfg.command)
    if isinstance(spawned, int):
        return spawned
    proc, agent_in, agent_out = spawned
    procs.append(proc)
    log.info(
        "agent_started",
        pid=proc.pid,
        command=cfg.command,
        daemon=cfg.url,
        label=cfg.label,
        fallback=cfg.fallback,
        has_token=bool(cfg.token),
    )
    proxy.to_agent = to_agent = FdSink(agent_in, owned=True)
    proxy.to_client = to_client = FdSink(cfg.stdout_fd, owned=False)
    big = proxy.note_oversize
    from_client, from_agent = filters(loop)
    up = relay_thread(
        f"{name}-client-to-agent",
        lambda: read_fd(cfg.stdin_fd),
        LineRelay(to_agent, from_client, on_oversize=big),
        loop,
    )
    down = relay_thread(
        f"{name}-agent-to-client",
        lambda: read_fd(agent_out),
        LineRelay(to_client, from_agent, on_oversize=big),
        loop,
        after=lambda: os.close(agent_out),
    )
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
                waiting.discard(down)
                await proxy.settle_all("agent", answer=False)
                break
            if stopper in done:
                await proxy.settle_all("client", answer=True)
                grace = 0.0
                break
            if gone is not None and gone in done:  # nobody is left to talk to it: never an orphan
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
