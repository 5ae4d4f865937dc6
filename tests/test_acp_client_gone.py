"""An agent that never exits at its stdin's EOF (Claude Code's ACP adapter is one) does not outlive the
proxy's client: CLIENT_GONE_GRACE after the client closed stdin, the proxy stops it and exits."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from bot.acp import run as acp_run
from bot.door import run as door_run
from bot.door.config import ProxyConfig


@contextlib.asynccontextmanager
async def proxy_run(agent: list[str]) -> AsyncIterator[tuple[asyncio.Future[int], Callable[[], None]]]:
    """The proxy run in-process over two pipes, no daemon: (its task, what makes the client leave: EOF)."""
    client_in_r, client_in_w = os.pipe()
    client_out_r, client_out_w = os.pipe()
    cfg = ProxyConfig(command=agent, url="http://127.0.0.1:1", stdin_fd=client_in_r, stdout_fd=client_out_w)
    loop = asyncio.get_running_loop()
    open_fds = [client_in_r, client_in_w, client_out_r, client_out_w]

    def leave() -> None:
        open_fds.remove(client_in_w)
        os.close(client_in_w)

    try:
        yield asyncio.ensure_future(acp_run.run_proxy(cfg)), leave
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # the run's handlers, off the test's loop
            loop.remove_signal_handler(sig)
        for fd in open_fds:  # only those still open: a closed number may belong to someone else by now
            os.close(fd)


async def test_an_agent_deaf_to_eof_is_stopped_after_the_grace(monkeypatch: Any, tmp_path: Any) -> None:
    monkeypatch.setattr(door_run, "CLIENT_GONE_GRACE", 0.5)
    pidfile = tmp_path / "agent.pid"
    agent = [sys.executable, "-c",
             f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(120)"]
    async with proxy_run(agent) as (task, leave):
        deadline = time.monotonic() + 10
        while not pidfile.exists() or not pidfile.read_text():
            assert time.monotonic() < deadline, "the agent never started"
            await asyncio.sleep(0.05)
        pid = int(pidfile.read_text())
        t0 = time.monotonic()
        leave()  # the client leaves (EOF), and never sends a signal
        rc = await asyncio.wait_for(task, 15)
        took = time.monotonic() - t0
        assert rc == 128 + signal.SIGTERM, rc
        assert 0.4 <= took < 6, took
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        assert not os.path.exists(f"/proc/{pid}") or "zombie" in open(f"/proc/{pid}/status").read().lower()


async def test_an_agent_that_exits_at_eof_is_not_waited_for(monkeypatch: Any) -> None:
    monkeypatch.setattr(door_run, "CLIENT_GONE_GRACE", 30.0)
    async with proxy_run([sys.executable, "-c", "import sys; sys.stdin.read(); sys.exit(3)"]) as (task, leave):
        await asyncio.sleep(0.3)
        t0 = time.monotonic()
        leave()
        assert await asyncio.wait_for(task, 15) == 3
        assert time.monotonic() - t0 < 5
