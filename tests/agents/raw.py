"""Drive ``permission-bot acp`` byte for byte: the test is the client, ``raw_agent.py`` the agent."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.agents.session import PY, proxy_cmd

RAW_AGENT = str(Path(__file__).resolve().parent / "raw_agent.py")


class RawRun:
    """The proxy with the raw agent behind it; ``client_lines`` what reached the client, as bytes."""

    def __init__(self, proc: asyncio.subprocess.Process, agent_log: Path, stderr_path: Path) -> None:
        self.proc = proc
        self.agent_log = agent_log
        self.stderr_path = stderr_path
        self.client_lines: list[bytes] = []
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, flags: list[str], tmp: Path, exe: str | None = None) -> RawRun:
        n = len(list(tmp.glob("raw-*.log")))
        agent_log, err_path = tmp / f"raw-{n}.log", tmp / f"raw-{n}.stderr"
        agent_log.write_bytes(b"")
        with open(err_path, "wb") as err:
            proc = await asyncio.create_subprocess_exec(
                *proxy_cmd(exe), *flags, "--", PY, RAW_AGENT, str(agent_log),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=err,
            )
        return cls(proc, agent_log, err_path)

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        async for line in self.proc.stdout:
            self.client_lines.append(line)

    async def send(self, line: bytes | str | dict[str, Any]) -> None:
        """Write one line to the proxy as the client (a dict is dumped compactly)."""
        if isinstance(line, dict):
            line = json.dumps(line, separators=(",", ":"))
        data = line.encode() if isinstance(line, str) else line
        assert self.proc.stdin is not None
        self.proc.stdin.write(data + b"\n")
        await self.proc.stdin.drain()

    async def agent_sends(self, line: str) -> None:
        """Make the agent write ``line`` exactly (through a ``_test/emit`` the proxy relays)."""
        await self.send({"jsonrpc": "2.0", "method": "_test/emit", "params": {"line": line}})

    def agent_lines(self) -> list[bytes]:
        return self.agent_log.read_bytes().splitlines(keepends=True)

    def agent_json(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.agent_lines()]

    async def wait(self, pred: Callable[[], Any], timeout: float = 30, what: str = "condition") -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = pred()
            if got:
                return got
            await asyncio.sleep(0.02)
        raise AssertionError(f"no {what} within {timeout}s; agent got {self.agent_lines()}; "
                             f"client got {self.client_lines}; stderr:\n{self.stderr()}")

    async def agent_reply(self, rpc_id: Any, timeout: float = 30) -> dict[str, Any]:
        """The proxy's answer to the agent's request ``rpc_id``."""
        def find() -> dict[str, Any] | None:
            return next((m for m in self.agent_json() if m.get("id") == rpc_id and "method" not in m), None)

        got: dict[str, Any] = await self.wait(find, timeout, f"answer to {rpc_id!r}")
        return got

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    async def logged(self, text: str, timeout: float = 10) -> bool:
        """Whether the proxy's stderr shows ``text`` within ``timeout``: its log lines are written after
        the answer that follows them may already have reached the agent."""
        return bool(await self.wait(lambda: text in self.stderr(), timeout, f"log line {text!r}"))

    async def close(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 10)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        self._reader.cancel()


def permission_line(rpc_id: Any, sid: str, *, method: str = "session/request_permission", title: str = "Run it",
                    command: str = "bun test", tool_call_id: str = "call_1", kind: str = "execute",
                    tool_name: str | None = None) -> str:
    """A ``session/request_permission`` as one JSON line; ``method`` may be spelt with escapes."""
    tc: dict[str, Any] = {"toolCallId": tool_call_id, "title": title, "kind": kind, "rawInput": {"command": command}}
    if tool_name:
        tc["_meta"] = {"claudeCode": {"toolName": tool_name}}
    params = {
        "sessionId": sid,
        "toolCall": tc,
        "options": [
            {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
            {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
        ],
    }
    body = json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": "@M@", "params": params}, separators=(",", ":"))
    return body.replace('"@M@"', f'"{method}"')
