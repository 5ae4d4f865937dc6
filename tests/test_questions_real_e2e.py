"""Real Claude Code through Zed's ACP adapter, offline, against the real Synapse (issue 33).

``@zed-industries/claude-code-acp`` 0.16.2 (bundling Claude Code 2.1.44) behind ``permission-bot acp``; the model
calls ``ExitPlanMode`` with a Markdown plan; the adapter asks ``session/request_permission`` with the plan in
``rawInput.plan`` (FACTS.md facts 36, 38); the room shows a plan numbered by meaning; alice approves or keeps
planning; the model reads what Claude Code says of it.

Claude Code 2.1.332 through the product's hook (questions and plans): test_questions_hook_real_e2e; today's
adapter (``@agentclientprotocol/claude-agent-acp``): test_real_claude_questions_e2e.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests import test_real_agents_e2e as real
from tests.support.model_api import ModelApi

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
