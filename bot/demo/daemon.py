"""The demo's permission-bot daemon: its config (written with tomli-w), the process, and its HTTP API."""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import tomli_w

from bot.demo.homeserver import free_port
from bot.demo.saved import DemoError, Saved
from bot.demo.say import bindable, say, show, tail
from bot.util import jsonhttp
from bot.util.statedir import write_private


def write_config(state_dir: Path, saved: Saved, homeserver: str, bot_id: str, human_id: str, room_id: str,
                 bot_password: str) -> tuple[Path, str]:
    """``config.toml`` for this run (mode 600; the API port and the agent and decider tokens kept from earlier
    runs); and the API URL."""
    port = saved.get("api_port")
    if not isinstance(port, int) or not bindable(port):
        port = free_port()
    tokens = {}
    for role in ("agent", "decider"):  # named tokens, one per role: the agent never holds the approving one
        token = saved.get(f"{role}_token")
        tokens[role] = token if isinstance(token, str) else f"demo-{role}-" + secrets.token_hex(12)
    saved.update(api_port=port, agent_token=tokens["agent"], decider_token=tokens["decider"])
    saved.save()
    from nio.crypto import ENCRYPTION_ENABLED

    matrix: dict[str, Any] = {
        "homeserver": homeserver, "user_id": bot_id, "password": bot_password,
        "device_name": "permission-bot demo", "room": room_id,
    }
    if not ENCRYPTION_ENABLED:  # the demo room is unencrypted: without matrix-nio's e2e extra, run without
        matrix["encryption"] = False
    config = {
        "matrix": matrix,
        "answerers": {"users": [human_id]},
        "api": {"listen": f"127.0.0.1:{port}", "tokens": [
            {"name": f"demo-{role}", "role": role, "secret": secret} for role, secret in tokens.items()]},
        "state": {"path": str(state_dir / "bot")},
        "prompts": {"timeout": "15m", "on_timeout": "reject"},
        "log": {"level": "info", "format": "console"},
    }
    path = state_dir / "config.toml"
    write_private(path, "# Written by the demo (python -m bot.demo) on every run.\n" + tomli_w.dumps(config))
    return path, f"http://127.0.0.1:{port}"


class DemoDaemon:
    """The daemon process the demo started, and its API (with the demo's decider token)."""

    def __init__(self, state_dir: Path, api_url: str, token: str) -> None:
        self.api_url = api_url
        self.token = token
        self.log = state_dir / "daemon.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def api(self, method: str, path: str, body: Any = None, timeout: float = 10) -> tuple[int, Any]:
        """``(status, JSON body or None)``; ``jsonhttp.Unreachable`` when the daemon does not answer."""
        status, got = jsonhttp.call(method, self.api_url + path, body, token=self.token, timeout=timeout)
        return status, (got if 200 <= status < 300 else None)

    def start(self, config: Path, files: list[IO[bytes]]) -> None:
        out = open(self.log, "ab")
        files.append(out)
        cmd = [sys.executable, "-m", "bot", "run", "--config", str(config)]
        # its own session: Ctrl-C reaches the demo, which stops the daemon after the agent
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        say(f"[4/5] Daemon: permission-bot run --config {show(config)}")
        say(f"      API {self.api_url}, log {show(self.log)}")

    async def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise DemoError(f"the daemon exited ({self.proc.returncode}):\n{tail(self.log)}")
            try:
                status, body = await asyncio.to_thread(self.api, "GET", "/healthz", None, 2)
                if status == 200 and isinstance(body, dict) and body.get("matrix_ready"):
                    return
            except jsonhttp.Unreachable:
                pass
            await asyncio.sleep(0.2)
        raise DemoError(f"the daemon did not become ready in {timeout:.0f}s:\n{tail(self.log)}")

    async def cancel_stale(self) -> None:
        """Cancel requests an earlier, interrupted run left pending, so a plain "1" is unambiguous."""
        status, pending = await asyncio.to_thread(self.api, "GET", "/permissions")
        if status != 200 or not isinstance(pending, list):
            return
        for rec in pending:
            rid = jsonhttp.quote(str(rec.get("id", "")))
            await asyncio.to_thread(self.api, "POST", f"/permissions/{rid}", {"decision": "cancel"})
        if pending:
            say(f"      cancelled {len(pending)} request(s) left pending by an earlier run")

    async def wait_prompt(self, session_id: str, turn: asyncio.Task[str]) -> dict[str, Any]:
        """The session's first record once the bot has posted its prompt."""
        path = "/permissions?session=" + jsonhttp.quote(session_id)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if turn.done():
                raise DemoError(f"the agent's turn ended before any prompt was posted: {turn.result()}")
            status, recs = await asyncio.to_thread(self.api, "GET", path)
            if status == 200 and isinstance(recs, list):
                for rec in recs:
                    if isinstance(rec, dict) and rec.get("prompt_event_id"):
                        return rec
            await asyncio.sleep(0.2)
        raise DemoError(f"no prompt was posted within 60s; see {show(self.log)}")

    def stop(self) -> bool:
        """Stop the daemon; whether it was running."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return False
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        return True
