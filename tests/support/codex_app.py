"""An IDE stand-in for ``permission-bot codex-app-server``: starts the proxy in front of the real
``codex app-server`` (offline: its model is :mod:`tests.support.model_api`), speaks Codex's JSON-RPC over
the proxy's stdio, and keeps every line it sent and got, as bytes, for the relay checks.

A tap between the proxy and Codex (``tee`` on both pipes) keeps what Codex itself sent and got
(``server_out``, ``server_in``). ``CODEX_HOME`` is made under /var/tmp: Codex refuses to set up its Linux
sandbox helper under the temp dir (/tmp).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tests.support.model_api import ModelApi

BIN = Path(__file__).resolve().parent.parent / "agents-npm" / "node_modules" / ".bin"
MODEL = "gpt-5.5"  # a model Codex 0.171.0 knows: it then offers its usual tools, apply_patch among them


def codex_home(api: ModelApi) -> Path:
    """A fresh CODEX_HOME whose model provider is ``api`` (the caller removes it)."""
    home = Path(tempfile.mkdtemp(prefix="pb-codex-home-", dir="/var/tmp"))
    (home / "config.toml").write_text(
        f'model = "{MODEL}"\nmodel_provider = "mock"\n'
        f'[model_providers.mock]\nname = "mock"\nbase_url = "{api.url}/v1"\nwire_api = "responses"\n'
        "requires_openai_auth = false\nrequest_max_retries = 0\nstream_max_retries = 0\n"
    )
    return home


class CodexApp:
    """One proxy run with Codex behind it, as an IDE client drives it."""

    def __init__(self, proc: asyncio.subprocess.Process, tap: Path, home: Path) -> None:
        self.proc = proc
        self.tap = tap
        self.home = home
        self.sent: list[bytes] = []  # every line the client wrote, as written
        self.got: list[bytes] = []  # every line the client read, as read
        self.msgs: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._reader = asyncio.ensure_future(self._read())
        self._stderr = asyncio.ensure_future(self._drain_stderr())
        self.stderr_text = b""

    @classmethod
    async def start(cls, exe: str, daemon_url: str, token: str, api: ModelApi, tmp: Path,
                    label: str = "codex-app") -> CodexApp:
        home = codex_home(api)
        tap = tmp / "tap"
        tap.mkdir()
        token_file = tmp / "agent.token"
        token_file.write_text(token)
        token_file.chmod(0o600)
        tee = 'tee -- "$1" | "$3" app-server | tee -- "$2"'
        cmd = [exe, "codex-app-server", "--url", daemon_url, "--token-file", str(token_file), "--label", label,
               "--", "bash", "-c", tee, "tap", str(tap / "server_in"), str(tap / "server_out"), str(BIN / "codex")]
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(home),
            "CODEX_HOME": str(home),
            "HTTPS_PROXY": api.proxy_url,
            "HTTP_PROXY": api.proxy_url,
            "NO_PROXY": "127.0.0.1,localhost",
            "RUST_LOG": "warn",
        }
        proc = await asyncio.create_subprocess_exec(
            *cmd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env=env, limit=64 * 1024 * 1024,
        )
        return cls(proc, tap, home)

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            self.got.append(line)
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict):
                self.msgs.append(msg)
                if "method" in msg and "id" in msg:  # a server request that reached the client: not ours
                    await self.write({"id": msg["id"], "error": {"code": -32601, "message": "not handled"}})

    async def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        while chunk := await self.proc.stderr.read(65536):
            self.stderr_text += chunk

    def stderr(self) -> str:
        return self.stderr_text.decode(errors="replace")[-6000:]

    async def write(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        line = (json.dumps(msg) + "\n").encode()
        self.sent.append(line)
        self.proc.stdin.write(line)
        await self.proc.stdin.drain()

    async def wait(self, pred: Any, timeout: float = 90) -> dict[str, Any]:
        deadline = asyncio.get_running_loop().time() + timeout
        seen = 0
        while True:
            for m in self.msgs[seen:]:
                if pred(m):
                    return m
            seen = len(self.msgs)
            if asyncio.get_running_loop().time() > deadline or self._reader.done():
                raise AssertionError(f"not seen in {timeout}s; stderr:\n{self.stderr()}")
            await asyncio.sleep(0.05)

    async def request(self, method: str, params: dict[str, Any], timeout: float = 90) -> dict[str, Any]:
        i = next(self._ids)
        await self.write({"id": i, "method": method, "params": params})
        reply = await self.wait(lambda m: m.get("id") == i and "method" not in m, timeout)
        assert "result" in reply, reply
        return reply["result"]  # type: ignore[no-any-return]

    async def begin(self, cwd: Path) -> str:
        """initialize, then a thread in ``cwd`` (read-only sandbox, approvals on request): its id."""
        await self.request("initialize", {"clientInfo": {"name": "pb-test-ide", "version": "0.1"},
                                          "capabilities": {"experimentalApi": True}})
        await self.write({"method": "initialized"})
        r = await self.request("thread/start", {"cwd": str(cwd), "approvalPolicy": "on-request",
                                                "sandbox": "read-only"})
        return str(r["thread"]["id"])

    async def turn(self, thread: str, text: str, *, plan: bool = False) -> str:
        """Start a turn (in collaboration mode ``plan`` when asked: the only one with questions); its id."""
        params: dict[str, Any] = {"threadId": thread, "input": [{"type": "text", "text": text}]}
        if plan:
            params["collaborationMode"] = {"mode": "plan", "settings": {"model": MODEL, "developer_instructions": None}}
        r = await self.request("turn/start", params)
        return str(r["turn"]["id"])

    async def turn_done(self, timeout: float = 120) -> dict[str, Any]:
        return await self.wait(lambda m: m.get("method") == "turn/completed", timeout)

    def methods(self) -> list[str]:
        return [str(m["method"]) for m in self.msgs if "method" in m]

    def agent_text(self) -> list[str]:
        return [m["params"]["item"]["text"] for m in self.msgs
                if m.get("method") == "item/completed" and m["params"]["item"].get("type") == "agentMessage"]

    async def close(self) -> int:
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        try:
            rc = await asyncio.wait_for(self.proc.wait(), 30)
        except TimeoutError:
            self.proc.kill()
            rc = await self.proc.wait()
        await asyncio.wait({self._reader, self._stderr}, timeout=5)
        shutil.rmtree(self.home, ignore_errors=True)
        return rc
