"""Drive ``scripted_client.py -> permission-bot acp -> scripted_agent.py`` as real processes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

AGENTS = Path(__file__).resolve().parent
PY = sys.executable
SCRIPTED_AGENT = str(AGENTS / "scripted_agent.py")
SCRIPTED_CLIENT = str(AGENTS / "scripted_client.py")
ECHO_AGENT = str(AGENTS / "echo_agent.py")

FOUR = [
    ["allow_once", "Allow once", "allow_once"],
    ["allow_always", "Always allow", "allow_always"],
    ["reject_once", "Reject", "reject_once"],
    ["reject_always", "Never allow", "reject_always"],
]


def proxy_cmd(exe: str | None = None) -> list[str]:
    """How to start ``permission-bot acp``: the console script when installed, else the module."""
    if exe:
        return [exe, "acp"]
    script = Path(PY).parent / "permission-bot"
    if script.exists():
        return [str(script), "acp"]
    return [PY, "-m", "bot.cli.acp_cmd"]


def script(
    title: str = "Run the test suite",
    command: str = "bun test",
    options: list[list[str]] | None = None,
    sparse: bool = False,
    tool_call_id: str = "call_1",
    kind: str = "execute",
    locations: tuple[str, ...] = ("apps/hub",),
    **extra: Any,
) -> dict[str, Any]:
    """One prompt script for the scripted agent (the contract checks' format)."""
    return {
        "tool_call_id": tool_call_id,
        "title": title,
        "kind": kind,
        "raw_input": {"command": command},
        "locations": list(locations),
        "options": options or FOUR,
        "sparse": sparse,
        **extra,
    }


class ClientRun:
    """One scripted client process, its JSON stdout lines and its stderr (the proxy's logs)."""

    def __init__(self, proc: asyncio.subprocess.Process, stderr_path: Path) -> None:
        self.proc = proc
        self.stderr_path = stderr_path
        self.lines: list[dict[str, Any]] = []
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(
        cls,
        scripts: list[dict[str, Any]] | list[str] | dict[str, Any] | str,
        proxy_flags: list[str],
        tmp: Path,
        *,
        client_flags: list[str] | None = None,
        env: dict[str, str] | None = None,
        exe: str | None = None,
        agent: list[str] | None = None,
    ) -> ClientRun:
        cmd = [PY, SCRIPTED_CLIENT, json.dumps(scripts), *(client_flags or [])]
        for k, v in (env or {}).items():
            cmd += ["--env", f"{k}={v}"]
        cmd += ["--", *proxy_cmd(exe), *proxy_flags, "--", *(agent or [PY, SCRIPTED_AGENT])]
        n = len(list(tmp.glob("client-*.stderr")))
        path = tmp / f"client-{n}.stderr"
        with open(path, "wb") as err:
            proc = await asyncio.create_subprocess_exec(
                *cmd, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=err,
                start_new_session=True,  # its own process group: close() ends the proxy and the agent with it
            )
        return cls(proc, path)

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        async for line in self.proc.stdout:
            try:
                self.lines.append(json.loads(line))
            except ValueError:
                self.lines.append({"event": "garbage", "line": line.decode(errors="replace")})

    async def wait_line(self, pred: Callable[[dict[str, Any]], bool], timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for d in self.lines:
                if pred(d):
                    return d
            if self._reader.done() and not any(pred(d) for d in self.lines):
                break
            await asyncio.sleep(0.02)
        raise AssertionError(f"no such line within {timeout}s; got {self.lines}; stderr:\n{self.stderr()}")

    async def session_id(self, timeout: float = 30) -> str:
        return str((await self.wait_line(lambda d: d.get("event") == "session", timeout))["session_id"])

    async def outcomes(self, n: int = 1, timeout: float = 30) -> list[dict[str, Any]]:
        def enough(_d: dict[str, Any]) -> bool:
            return len([x for x in self.lines if x.get("event") == "outcome"]) >= n

        await self.wait_line(enough, timeout)
        return [x["outcome"] for x in self.lines if x.get("event") == "outcome"]

    async def outcome(self, timeout: float = 30) -> dict[str, Any]:
        return (await self.outcomes(1, timeout))[0]

    async def finish(self, timeout: float = 30) -> int:
        """Wait for the client to exit; the proxy's exit code as the client saw it."""
        await asyncio.wait_for(self.proc.wait(), timeout)
        await self._reader
        ex = [d for d in self.lines if d.get("event") == "exit"]
        assert ex, f"client did not report the proxy's exit: {self.lines}\n{self.stderr()}"
        return int(ex[0]["returncode"])

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    async def logged(self, text: str, timeout: float = 10) -> bool:
        """Whether the proxy's stderr shows ``text`` within ``timeout`` (its log lines may come after the
        answer they explain)."""
        deadline = time.monotonic() + timeout
        while text not in self.stderr():
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.02)
        return True

    async def close(self) -> None:
        if self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        # What the client started (the proxy, the agent and its children: a real agent need not exit on its
        # stdin's EOF) goes with it, never left running after the test.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self._reader.cancel()
