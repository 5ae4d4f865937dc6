"""Real third-party ACP agents from npm behind ``permission-bot acp``, offline, against the real Synapse.

Zed's Claude Code adapter and Gemini CLI (``--acp``), pinned in ``tests/agents-npm``, whose model
APIs are answered on loopback by ``tests.support.model_api``: the model asks to run
``touch MARKER``; alice answers in the room; the tool runs or not; a ``session/cancel`` cancels.
The agent gets a trimmed environment (the SDK client's): no ``IS_SANDBOX`` (which makes the Claude
adapter ask for bypass mode, refused as root), a fresh ``HOME``, telemetry and updates off, and
a refusing loopback port as HTTP(S) proxy for all but 127.0.0.1: no DNS lookup, nothing leaves
the machine (checked with strace: without it Claude Code looks up api.anthropic.com and
Gemini CLI play.googleapis.com).
Skipped only when ``tests/agents-npm/node_modules`` is absent and ``PB_REAL_AGENTS`` is not
``required`` (``scripts/test`` installs them and sets it, so CI always runs these).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.agents.session import ClientRun
from tests.support.model_api import ModelApi
from tests.test_acp_e2e import prompt_for, record

BIN = Path(__file__).resolve().parent / "agents-npm" / "node_modules" / ".bin"
REQUIRED = os.environ.get("PB_REAL_AGENTS") == "required"
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not BIN.is_dir() and not REQUIRED, reason="tests/agents-npm not installed (scripts/test does)"),
]
QUIET = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "GEMINI_TELEMETRY_ENABLED": "false",
    "NO_BROWSER": "1",
}
AGENTS = ["claude", "gemini"]


def _agent(name: str, api: str) -> tuple[list[str], dict[str, str]]:
    if name == "claude":
        return [str(BIN / "claude-code-acp")], {"ANTHROPIC_BASE_URL": api, "ANTHROPIC_API_KEY": "dummy"}
    return [str(BIN / "gemini"), "--acp"], {"GOOGLE_GEMINI_BASE_URL": api, "GEMINI_API_KEY": "dummy"}


@pytest.fixture
async def model_api() -> AsyncIterator[ModelApi]:
    if not BIN.is_dir():  # PB_REAL_AGENTS=required (scripts/test, CI): a failure, never a skip
        pytest.fail(f"{BIN.parent} is missing: run `npm ci --ignore-scripts` in tests/agents-npm")
    api = await ModelApi().start()
    yield api
    await api.close()


class Run:
    """One real agent behind the proxy, driven by the SDK client for one prompt turn."""

    def __init__(self, client: ClientRun, marker: Path, cancel_file: Path) -> None:
        self.client, self.marker, self.cancel_file = client, marker, cancel_file

    @classmethod
    async def start(
        cls,
        station: Any,
        api: ModelApi,
        tmp: Path,
        name: str,
        settings: dict[str, Any] | None = None,
        url: str | None = None,
        *,
        agent: tuple[list[str], dict[str, str]] | None = None,
        prompts: list[str] | None = None,
    ) -> Run:
        """``settings``: a project ``.claude/settings.json`` for the agent's work dir (hooks, say);
        ``url``: where the proxy finds the daemon (else the station's API); ``agent``: its command and
        environment (else ``name``'s here); ``prompts``: the turns, one after another (else one asking to
        touch the marker). The work dir is ``tmp/work``, HOME ``tmp/home`` (either may exist already)."""
        work, home = tmp / "work", tmp / "home"
        work.mkdir(exist_ok=True)
        home.mkdir(exist_ok=True)
        if settings is not None:
            (work / ".claude").mkdir()
            (work / ".claude" / "settings.json").write_text(json.dumps(settings))
        marker, cancel_file = work / "marker", tmp / "cancel-now"
        cmd, env = agent or _agent(name, api.url)
        flags = ["--cwd", str(work), "--cancel-when", str(cancel_file), *(["--sequential"] if prompts else [])]
        offline = {"HTTPS_PROXY": api.proxy_url, "HTTP_PROXY": api.proxy_url, "NO_PROXY": "127.0.0.1,localhost"}
        for k, v in {**QUIET, **offline, "HOME": str(home), **env}.items():
            flags += ["--env", f"{k}={v}"]
        c = await ClientRun.start(
            prompts or f"Please do this.\nRUN: touch {marker}\n",
            ["--url", url or station.api_url, "--token", station.token, "--label", f"real-{name}"],
            tmp,
            exe=station.exe,
            client_flags=flags,
            agent=cmd,
        )
        return cls(c, marker, cancel_file)

    async def prompt(self, station: Any) -> dict[str, Any]:
        sid = await self.client.session_id(90)
        p = await prompt_for(station, sid, timeout=90)
        assert p, f"no prompt for the real agent's request; stderr:\n{self.client.stderr()}"
        await check_event(station, p["content"])
        return p

    async def done(self, api: ModelApi, timeout: float = 90) -> dict[str, Any]:
        try:
            return await self.client.wait_line(lambda d: d.get("event") == "done", timeout)
        except AssertionError as e:
            raise AssertionError(f"model calls: {api.requests}; marker: {self.marker.exists()}") from e


async def check_event(station: Any, content: dict[str, Any]) -> None:
    """The posted prompt passes ``permission-bot check-event`` (the v2 event's schema)."""
    check = await asyncio.to_thread(
        subprocess.run,
        [station.exe, "check-event", "-"],
        input=json.dumps(content),
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stderr


def assert_agent_sent(name: str, params: dict[str, Any], command: str) -> None:
    """What each agent puts in its request (as kept in the record): the facts prompts are built from."""
    assert [o["kind"] for o in params["options"]] == ["allow_always", "allow_once", "reject_once"]
    tc = params["toolCall"]
    if name == "claude":  # tool name and kind only in the earlier tool_call updates (_meta.claudeCode.toolName)
        assert set(tc) == {"toolCallId", "title", "rawInput"}
        assert tc["title"] == f"`{command}`" and tc["rawInput"]["command"] == command
    else:  # no rawInput, no _meta, no earlier tool_call: the command is only the title
        assert "rawInput" not in tc and "_meta" not in tc
        assert tc["title"] == command and tc["kind"] == "execute"


def number_of(content: dict[str, Any], rec: dict[str, Any], kind: str) -> str:
    """The shown number of the agent's option of this kind: its place in the v2 event's options."""
    (agent_id,) = [o["optionId"] for o in rec["params"]["options"] if o["kind"] == kind]
    ids = [o["id"] for o in content["options"]]
    return str(ids.index(agent_id) + 1)


@pytest.mark.parametrize("name", AGENTS)
async def test_real_agent_allow_once_runs_the_tool(
    station: Any, model_api: ModelApi, tmp_path: Path, name: str
) -> None:
    run = await Run.start(station, model_api, tmp_path, name)
    try:
        p = await run.prompt(station)
        content = p["content"]
        rec = await record(station, content["request_id"])
        assert rec["state"] == "pending" and not run.marker.exists()
        assert_agent_sent(name, rec["params"], f"touch {run.marker}")
        await station.alice.text(number_of(content, rec, "allow_once"), reply_to=p["event_id"])
        done = await run.done(model_api)
        assert done["stop_reasons"] == ["end_turn"] and done["client_permission_requests"] == 0
        assert run.marker.exists(), "allowed once, yet the tool did not run"
        got = await record(station, content["request_id"])
        assert got["state"] == "resolved"
        assert [o["kind"] for o in rec["params"]["options"] if o["optionId"] == got["outcome"]["option_id"]] == [
            "allow_once"
        ]
    finally:
        await run.client.close()


@pytest.mark.parametrize("name", AGENTS)
async def test_real_agent_reject_keeps_the_tool_from_running(
    station: Any, model_api: ModelApi, tmp_path: Path, name: str
) -> None:
    run = await Run.start(station, model_api, tmp_path, name)
    try:
        p = await run.prompt(station)
        rec = await record(station, p["content"]["request_id"])
        await station.alice.text(number_of(p["content"], rec, "reject_once"), reply_to=p["event_id"])
        done = await run.done(model_api)
        assert done["stop_reasons"] == ["end_turn"] and done["client_permission_requests"] == 0
        got = await record(station, rec["id"])
        assert got["state"] == "resolved"
        assert [o["kind"] for o in rec["params"]["options"] if o["optionId"] == got["outcome"]["option_id"]] == [
            "reject_once"
        ]
        assert not run.marker.exists(), "rejected, yet the tool ran"
    finally:
        await run.client.close()


@pytest.mark.parametrize("name", AGENTS)
async def test_real_agent_session_cancel_cancels_the_turn(
    station: Any, model_api: ModelApi, tmp_path: Path, name: str
) -> None:
    run = await Run.start(station, model_api, tmp_path, name)
    try:
        p = await run.prompt(station)
        run.cancel_file.touch()
        done = await run.done(model_api)
        # What the proxy owes: the request answered cancelled, nothing run. The stop reason is the agent's:
        # Claude's adapter says "cancelled"; Gemini CLI 0.61 sometimes ends the turn first ("end_turn").
        allowed = [["cancelled"]] if name == "claude" else [["cancelled"], ["end_turn"]]
        assert done["stop_reasons"] in allowed, done
        assert done["client_permission_requests"] == 0
        got = await record(station, p["content"]["request_id"])
        assert got["state"] == "cancelled" and got["outcome"]["option_id"] is None
        assert not run.marker.exists(), "cancelled, yet the tool ran"
    finally:
        await run.client.close()
