"""Claude's ACP adapter (``@agentclientprotocol/claude-agent-acp`` 0.101.0, bundling Claude Code 2.1.318, pinned
in ``tests/agents-npm``) behind ``permission-bot acp``, offline against the real Synapse: the model
(``tests.support.model_api``) asks ``AskUserQuestion``; the adapter sends it as ``elicitation/create`` only because
the proxy advertised elicitation (the SDK client here does not); alice answers in the room; the model receives
exactly the answers.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.agents.session import ClientRun
from tests.support.model_api import ModelApi
from tests.test_acp_elicitation_e2e import answer, wait_prompts
from tests.test_real_agents_e2e import BIN, QUIET, REQUIRED

ADAPTER = BIN / "claude-agent-acp"
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not ADAPTER.exists() and not REQUIRED, reason="claude-agent-acp not installed"),
]

QUESTIONS = {"questions": [
    {"question": "Which database should we use?", "header": "Database", "multiSelect": False,
     "options": [{"label": "Postgres", "description": "Relational, server based"},
                 {"label": "SQLite", "description": "Single file, no server"}]},
    {"question": "Which extras do you want?", "header": "Extras", "multiSelect": True,
     "options": [{"label": "Docker", "description": "Add a Dockerfile"},
                 {"label": "CI", "description": "Add a CI workflow"},
                 {"label": "Docs", "description": "Add a README section"}]},
]}


async def _start(station: Any, api: ModelApi, tmp: Path, prompt: str = "") -> ClientRun:
    work, home = tmp / "work", tmp / "home"
    work.mkdir()
    home.mkdir()
    env = {**QUIET, "HTTPS_PROXY": api.proxy_url, "HTTP_PROXY": api.proxy_url, "NO_PROXY": "127.0.0.1,localhost",
           "ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "dummy", "HOME": str(home)}
    flags = ["--cwd", str(work)]
    for k, v in env.items():
        flags += ["--env", f"{k}={v}"]
    return await ClientRun.start(
        prompt or f"Please ask me.\nASK: {json.dumps(QUESTIONS)}\n",
        ["--url", station.api_url, "--token", station.token, "--label", "real-claude-a101"],
        tmp, exe=station.exe, client_flags=flags, agent=[str(ADAPTER)],
    )


async def test_ask_user_question_answered_in_the_room(station: Any, tmp_path: Path) -> None:
    if not ADAPTER.exists():
        pytest.fail(f"{ADAPTER} is missing: run `npm ci --ignore-scripts` in tests/agents-npm")
    api = await ModelApi().start()
    c = await _start(station, api, tmp_path)
    try:
        sid = await c.session_id(90)
        ps = await wait_prompts(station, sid, 2, timeout=90)
        assert "Which database should we use?" in ps[0]["content"]["body"]
        assert [o["id"] for o in ps[1]["content"]["options"]] == ["Docker", "CI", "Docs", "decline"]
        await answer(station, ps[0], "2")
        await answer(station, ps[1], "Docker, CI")
        done = await c.wait_line(lambda d: d.get("event") == "done", 90)
        assert done["stop_reasons"] == ["end_turn"]
        got = "\n".join(api.tool_results)
        assert '"Which database should we use?"="SQLite"' in got, (got, api.requests)
        assert '"Which extras do you want?"="Docker, CI"' in got, got
        assert await c.logged("elicitation_answered")
    finally:
        await c.close()
        await api.close()
        await asyncio.sleep(0)


@pytest.mark.parametrize(("reply", "approved"), [("1", True), ("No, keep planning", False)])
async def test_plan_approved_and_rejected_in_the_room(station: Any, tmp_path: Path, reply: str, approved: bool) -> None:
    if not ADAPTER.exists():
        pytest.fail(f"{ADAPTER} is missing: run `npm ci --ignore-scripts` in tests/agents-npm")
    api = await ModelApi().start()
    c = await _start(station, api, tmp_path, "Please plan it.\nPLAN: Create the file M1\n")
    try:
        sid = await c.session_id(90)
        (p,) = await wait_prompts(station, sid, 1, timeout=90)
        content = p["content"]
        assert "Plan to approve" in content["body"] and "Create the file M1" in content["body"], content["body"]
        assert "<li>Create the file M1</li>" in content["formatted_body"]
        assert content["options"][0]["id"] == "exit-plan-default" and content["options"][-1]["id"] == "reject"
        await answer(station, p, reply)
        done = await c.wait_line(lambda d: d.get("event") == "done", 90)
        got = "\n".join(api.tool_results)
        if approved:
            assert done["stop_reasons"] == ["end_turn"]
            assert "User has approved your plan" in got and "Create the file M1" in got, got
        else:
            assert done["stop_reasons"] == ["cancelled"]  # fact 42: reject ends the turn, no tool_result
            assert "User has approved" not in got, got
    finally:
        await c.close()
        await api.close()
