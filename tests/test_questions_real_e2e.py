"""Real Claude Code, offline, against the real Synapse (issue 33).

- Through ACP: Zed's adapter (``@zed-industries/claude-code-acp`` 0.16.2, bundling Claude Code 2.1.44) behind
  ``permission-bot acp``; the model calls ``ExitPlanMode`` with a Markdown plan; the adapter asks
  ``session/request_permission`` with the plan in ``rawInput.plan`` (FACTS.md facts 36, 38); the room shows a
  plan numbered by meaning; alice approves or keeps planning; the model reads what Claude Code says of it.
- Through the hook: the same Claude Code (the Agent SDK's ``cli.js``) run as an SDK host runs it
  (``-p --input-format stream-json --permission-prompt-tool stdio``) with the product's PermissionRequest hook:
  a two-question ``AskUserQuestion`` (one multi-select) answered in the room, and a plan in plan mode approved or
  sent back with feedback; the model reads exactly the answers, the approval, the feedback.

Claude Code 2.1.332 (the CLI FACTS.md records) is not in ``tests/agents-npm``; the hook's outputs for its
captured inputs are checked in test_questions_e2e.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests import test_real_agents_e2e as real
from tests.support.model_api import ModelApi
from tests.support.station import AGENT_TOKEN

pytestmark = real.pytestmark
PLAN = "# Plan\n\n1. Create the file M1\n2. Run the tests\n\n```sh\nmake test\n```\n"


class PlanModel(ModelApi):
    """The model: ``ExitPlanMode`` with :data:`PLAN` (the turn's first call), then a short text; every tool
    result is kept."""

    results: list[str]

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        messages = body.get("messages") or []
        if not hasattr(self, "results"):
            self.results = []
        for m in messages:
            for b in m.get("content") if isinstance(m.get("content"), list) else []:
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    c = b.get("content")
                    text = c if isinstance(c, str) else json.dumps(c)
                    if text not in self.results:
                        self.results.append(text)
        used = any(isinstance(b, dict) and b.get("type") == "tool_use" for m in messages
                   for b in (m.get("content") if isinstance(m.get("content"), list) else []))
        tools = {t.get("name") for t in body.get("tools") or []}
        if "Bash" not in tools or used or not body.get("stream"):  # side calls, and the turn's end
            return await super()._messages(request)
        self._log(request, "tool_use")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)

        async def send(kind: str, data: dict[str, Any]) -> None:
            await resp.write(f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode())

        await send("message_start", {"message": {"id": "msg_p", "type": "message", "role": "assistant",
                                                 "model": body.get("model", "claude"), "content": [],
                                                 "stop_reason": None, "stop_sequence": None,
                                                 "usage": {"input_tokens": 10, "output_tokens": 1}}})
        block = {"type": "tool_use", "id": "toolu_plan1", "name": "ExitPlanMode", "input": {}}
        await send("content_block_start", {"index": 0, "content_block": block})
        delta = {"type": "input_json_delta", "partial_json": json.dumps({"plan": PLAN})}
        await send("content_block_delta", {"index": 0, "delta": delta})
        await send("content_block_stop", {"index": 0})
        await send("message_delta", {"delta": {"stop_reason": "tool_use", "stop_sequence": None},
                                     "usage": {"output_tokens": 5}})
        await send("message_stop", {})
        await resp.write_eof()
        return resp


@pytest.fixture
async def plan_model() -> Any:
    if not real.BIN.is_dir():
        pytest.fail(f"{real.BIN.parent} is missing: run `npm ci --ignore-scripts` in tests/agents-npm")
    api = await PlanModel().start()
    yield api
    await api.close()


@pytest.mark.parametrize(("answer", "option"), [("1", "default"), ("3 - add a lint step", "plan")],
                         ids=["approve", "keep-planning"])
async def test_a_real_claude_code_plan_answered_in_the_room(
    station: Any, plan_model: PlanModel, tmp_path: Path, answer: str, option: str
) -> None:
    run = await real.Run.start(station, plan_model, tmp_path, "claude")
    try:
        sid = await run.client.session_id(90)
        p = await real.prompt_for(station, sid, timeout=90)
        assert p, f"no plan prompt; model calls {plan_model.requests}; stderr:\n{run.client.stderr()}"
        body = p["content"]["body"]
        assert body.startswith("Plan to approve: Ready to code?"), body
        assert "│ # Plan" in body and "│ 2. Run the tests" in body and "make test" in p["content"]["formatted_body"]
        assert "1. Yes, and manually approve edits\n2. Yes, and auto-accept edits\n3. No, keep planning" in body
        await station.alice.text(answer, reply_to=p["event_id"])
        await run.done(plan_model)
        if option == "default":  # what Claude Code 2.1.44 tells the model of an approval (FACTS.md fact 38)
            assert any("User has approved exiting plan mode" in r for r in plan_model.results), plan_model.results
        else:  # keep planning: deny with interrupt, the turn ends; ACP has no field for the feedback (fact 42)
            assert not any("approved" in r for r in plan_model.results), plan_model.results
        _, rec = await station.ahttp("GET", f"/permissions/{sid}:1")
        assert rec["kind"] == "plan" and rec["outcome"]["option_id"] == option
    finally:
        await run.client.close()


CLI_JS = real.BIN.parent / "@anthropic-ai" / "claude-agent-sdk" / "cli.js"
QUESTIONS = json.loads((Path(__file__).parent / "fixtures" / "questions" /
                        "hook-PermissionRequest-AskUserQuestion.json").read_text())["tool_input"]


class ToolModel(PlanModel):
    """The model: one call of ``tool`` with ``tool_input`` (when the turn offers it), then a short text."""

    tool = "AskUserQuestion"
    tool_input: dict[str, Any] = QUESTIONS

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        messages = body.get("messages") or []
        if not hasattr(self, "results"):
            self.results = []
        blocks = [b for m in messages for b in (m.get("content") if isinstance(m.get("content"), list) else [])
                  if isinstance(b, dict)]
        for b in blocks:
            if b.get("type") == "tool_result":
                c = b.get("content")
                text = c if isinstance(c, str) else json.dumps(c)
                if text not in self.results:
                    self.results.append(text)
        tools = {t.get("name") for t in body.get("tools") or []}
        if self.tool not in tools or any(b.get("type") == "tool_use" for b in blocks) or not body.get("stream"):
            return await ModelApi._messages(self, request)
        self._log(request, "tool_use")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)

        async def send(kind: str, data: dict[str, Any]) -> None:
            await resp.write(f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode())

        usage = {"input_tokens": 1, "output_tokens": 1}
        await send("message_start", {"message": {"id": "msg_q", "type": "message", "role": "assistant",
                                                 "model": "claude", "content": [], "stop_reason": None,
                                                 "stop_sequence": None, "usage": usage}})
        block = {"type": "tool_use", "id": "toolu_ask1", "name": self.tool, "input": {}}
        await send("content_block_start", {"index": 0, "content_block": block})
        await send("content_block_delta", {"index": 0, "delta": {"type": "input_json_delta",
                                                                 "partial_json": json.dumps(self.tool_input)}})
        await send("content_block_stop", {"index": 0})
        await send("message_delta", {"delta": {"stop_reason": "tool_use", "stop_sequence": None},
                                     "usage": {"output_tokens": 5}})
        await send("message_stop", {})
        await resp.write_eof()
        return resp


async def sdk_host_run(station: Any, api: ModelApi, tmp: Path, *mode: str) -> asyncio.subprocess.Process:
    """Claude Code (the Agent SDK's cli.js) as an SDK host runs it, with the product's PermissionRequest hook
    (``hook print-config``'s command, ``--url`` and an agent token file); one user turn on stdin."""
    work, home = tmp / "work", tmp / "home"
    work.mkdir()
    home.mkdir()
    token_file = tmp / "agent.token"
    token_file.write_text(AGENT_TOKEN[1] + "\n")
    token_file.chmod(0o600)
    hook = f"{station.exe} hook claude-code --url {station.api_url} --token-file {token_file}"
    settings = {"hooks": {"PermissionRequest": [{"matcher": "*", "hooks": [
        {"type": "command", "command": hook, "timeout": 120}]}]}}
    (tmp / "settings.json").write_text(json.dumps(settings))
    env = {**real.QUIET, **{k: os.environ[k] for k in ("PATH", "PYTHONPATH") if k in os.environ},
           "HOME": str(home), "ANTHROPIC_BASE_URL": api.url,
           "ANTHROPIC_API_KEY": "dummy", "HTTPS_PROXY": api.proxy_url, "HTTP_PROXY": api.proxy_url,
           "NO_PROXY": "127.0.0.1,localhost"}
    proc = await asyncio.create_subprocess_exec(
        "node", str(CLI_JS), "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
        "--permission-prompt-tool", "stdio", "--settings", str(tmp / "settings.json"), *mode,
        cwd=work, env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert proc.stdin is not None
    turn = {"type": "user", "message": {"role": "user", "content": "Please go on."}}
    proc.stdin.write(json.dumps(turn).encode() + b"\n")
    await proc.stdin.drain()
    return proc


async def turn_result(proc: asyncio.subprocess.Process, timeout: float = 90) -> dict[str, Any]:
    """The stream's ``result`` line; then stdin is closed and the process ends."""
    assert proc.stdout is not None and proc.stdin is not None
    async with asyncio.timeout(timeout):
        while line := await proc.stdout.readline():
            msg = json.loads(line) if line.strip().startswith(b"{") else {}
            if msg.get("type") == "result":
                proc.stdin.close()
                await proc.wait()
                return dict(msg)
    raise AssertionError("no result line")


@pytest.fixture
async def ask_model() -> Any:
    if not CLI_JS.is_file():
        pytest.fail(f"{CLI_JS} is missing: run `npm ci --ignore-scripts` in tests/agents-npm")
    api = await ToolModel().start()
    yield api
    await api.close()


async def test_real_claude_code_gets_the_rooms_answers(station: Any, ask_model: ToolModel, tmp_path: Path,
                                                       sid: str) -> None:
    """Claude Code 2.1.44 (SDK host mode) asks a two-question AskUserQuestion (one multi-select); the product's
    hook posts both; alice answers one in her own words and one by labels; the model reads exactly those."""
    await station.alice.follow()
    start = station.alice.mark()  # other tests of the shared station ask the same question: only this one's
    proc = await sdk_host_run(station, ask_model, tmp_path)
    try:
        first = await station.alice.wait(lambda e: station.is_prompt(e) and e["content"].get("request_seq") == 1
                                          and e["content"].get("tool_kind") == "question"
                                          and "Which database" in e["content"].get("title", ""), 90, start=start)
        assert first, "no question prompt"
        session = first["content"]["session_id"]
        second = await station.prompt_for(session, seq=2)
        assert second
        await station.alice.text("MySQL, please", reply_to=first["event_id"])
        await station.alice.text("2, 1", reply_to=second["event_id"])
        done = await turn_result(proc)
        assert done["subtype"] == "success", done
        got = "\n".join(ask_model.results)
        assert '"Which database should we use?"="MySQL, please"' in got, got
        assert '"Which extras do you want?"="Docker, CI"' in got, got
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


seen: set[str] = set()  # plan prompts a test took (the next test's plan has the same text)


class PlanToolModel(ToolModel):
    tool = "ExitPlanMode"
    tool_input: dict[str, Any] = {"plan": PLAN}  # noqa: RUF012


@pytest.mark.parametrize(("answer", "expect"), [("1", "approved"), ("3 - add a lint step", "add a lint step")],
                         ids=["approve", "keep-planning"])
async def test_real_claude_code_plan_through_the_hook(station: Any, tmp_path: Path, answer: str, expect: str) -> None:
    """Claude Code 2.1.44 in plan mode calls ExitPlanMode; the hook posts the plan; alice approves it (the hook
    echoes the input) or keeps planning with feedback (the model reads exactly her words)."""
    api = await PlanToolModel().start()
    await station.alice.follow()
    start = station.alice.mark()  # other tests of the shared station post plans too: only this one's
    proc = await sdk_host_run(station, api, tmp_path, "--permission-mode", "plan")
    try:
        p = await station.alice.wait(lambda e: station.is_prompt(e) and e["content"].get("tool_kind") == "switch_mode"
                                     and "│ 2. Run the tests" in e["content"].get("body", "")
                                     and "Agent: claude-code" in e["content"].get("body", "")  # the hook's
                                     and e["content"].get("request_id", "").endswith(":1")
                                     and e["event_id"] not in seen, 90, start=start)
        assert p, f"no plan prompt; model calls {api.requests}"
        seen.add(p["event_id"])
        await station.alice.text(answer, reply_to=p["event_id"])
        await turn_result(proc)
        got = "\n".join(api.results)
        assert expect in got, got
        if expect == "add a lint step":
            assert "add a lint step" in api.results, api.results  # the deny message, word for word
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await api.close()

