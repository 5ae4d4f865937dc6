"""Qwen Code's questions and plans through ``permission-bot acp``, in the real Synapse.

The agent is the tests' byte-level agent (tests/agents/raw_agent.py) replaying Qwen Code 0.24.4's own request
shapes (tests/fixtures/agents/qwen-*.json, captured from the real CLI): ``ask_user_question`` as a
``session/request_permission`` marked by its harness's ``_meta``, posted as questions and answered by number,
label or free text, the reply carrying Qwen's top-level ``answers``; ``exit_plan_mode`` posted as a plan.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.agents.raw import RawRun
from tests.test_acp_e2e import record
from tests.test_acp_elicitation_e2e import answer, raw, wait_prompts

pytestmark = pytest.mark.e2e

FIXTURES = Path(__file__).parent / "fixtures" / "agents"


@pytest.fixture
async def run(station: Any, tmp_path: Path) -> AsyncIterator[RawRun]:
    """``permission-bot acp`` with the byte-level agent behind it, initialized; closed after the test."""
    proxy = await raw(station, tmp_path)
    yield proxy
    await proxy.close()


def qwen(name: str, sid: str) -> dict[str, Any]:
    params: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    params["sessionId"] = sid
    return params


def request_line(rpc_id: Any, params: dict[str, Any]) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": "session/request_permission", "params": params})


def two_questions(sid: str) -> dict[str, Any]:
    """Qwen's question request with a second, multi-select question (the harness copies them into _meta)."""
    params = qwen("qwen-question", sid)
    extra = {"question": "Which extras do you want?", "header": "Extras", "multiSelect": True,
             "options": [{"label": "Docker", "description": "A container"}, {"label": "CI", "description": "Checks"},
                         {"label": "Docs", "description": "A site"}]}
    params["toolCall"]["rawInput"]["questions"].append(extra)
    params["toolCall"]["_meta"]["qwenQuestions"] = copy.deepcopy(params["toolCall"]["rawInput"]["questions"])
    params["toolCall"]["title"] = "Ask user 2 questions"
    return params


@pytest.mark.parametrize(("said", "got"), [("2", "SQLite"), ("postgres", "Postgres"),
                                           ("DuckDB, it is embedded", "DuckDB, it is embedded")],
                         ids=["number", "label", "free-text"])
async def test_a_qwen_question_answered(station: Any, run: RawRun, sid: str, said: str, got: str) -> None:
    await run.agent_sends(request_line(0, qwen("qwen-question", sid)))
    (p,) = await wait_prompts(station, sid, 1)
    c = p["content"]
    assert c["tool_kind"] == "question" and "Which database should we use?" in c["body"]
    assert [o["id"] for o in c["options"]] == ["Postgres", "SQLite", "decline"]
    assert "Single file, no server" in c["body"]  # a choice's description beside it
    await answer(station, p, said)
    reply = await run.agent_reply(0)
    assert reply["result"] == {"outcome": {"outcome": "selected", "optionId": "proceed_once"},
                               "answers": {"0": got}}
    rec = await record(station, c["request_id"])
    assert rec["kind"] == "question" and rec["outcome"]["answers"] == {"Which database should we use?": got}
    assert not [ln for ln in run.client_lines if b"request_permission" in ln]  # answered in the room alone


async def test_qwen_questions_one_prompt_each_multi_and_decline(station: Any, run: RawRun, sid: str) -> None:
    await run.agent_sends(request_line(1, two_questions(sid)))
    ps = sorted(await wait_prompts(station, sid, 2), key=lambda p: p["content"]["request_seq"])
    assert "question 1 of 2" in ps[0]["content"]["body"] and "Which extras" in ps[1]["content"]["body"]
    await answer(station, ps[0], "1")
    await answer(station, ps[1], "1, 3")
    reply = await run.agent_reply(1)
    assert reply["result"] == {"outcome": {"outcome": "selected", "optionId": "proceed_once"},
                               "answers": {"0": "Postgres", "1": "Docker, Docs"}}
    # decline: Qwen's reject option, never its allow option
    await run.agent_sends(request_line(2, qwen("qwen-question", sid)))
    p = (await wait_prompts(station, sid, 3))[-1]
    await answer(station, p, "3")  # Postgres, SQLite, decline
    assert (await run.agent_reply(2))["result"] == {"outcome": {"outcome": "selected", "optionId": "cancel"}}


async def test_a_qwen_question_cancelled_or_withdrawn(station: Any, run: RawRun, sid: str) -> None:
    """The turn cancelled (``session/cancel``): ``cancelled``; the request withdrawn by Qwen
    (``$/cancel_request``): the -32800 error; the prompts are cancelled either way."""
    await run.agent_sends(request_line(5, qwen("qwen-question", sid)))
    (p,) = await wait_prompts(station, sid, 1)
    await run.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    assert (await run.agent_reply(5))["result"] == {"outcome": {"outcome": "cancelled"}}
    assert (await record(station, p["content"]["request_id"]))["state"] == "cancelled"
    await run.agent_sends(request_line(7, qwen("qwen-question", sid)))
    second = (await wait_prompts(station, sid, 2))[-1]
    await run.agent_sends('{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":7}}')
    reply = await run.agent_reply(7)
    assert reply["error"]["code"] == -32800 and "result" not in reply
    assert (await record(station, second["content"]["request_id"]))["state"] == "cancelled"


async def test_a_question_without_the_harness_mark_is_a_permission(station: Any, run: RawRun, sid: str) -> None:
    """The same request less Qwen's ``_meta`` mark: a plain permission; ``1`` allows nothing but what it shows."""
    params = qwen("qwen-question", sid)
    del params["toolCall"]["_meta"]["qwenInteractionKind"]
    await run.agent_sends(request_line(6, params))
    (p,) = await wait_prompts(station, sid, 1)
    assert p["content"]["body"].startswith("Permission needed:")
    assert (await record(station, p["content"]["request_id"]))["kind"] == "permission"
    await answer(station, p, "2")
    assert (await run.agent_reply(6))["result"]["outcome"]["optionId"] == "cancel"


async def test_a_qwen_plan_approved(station: Any, run: RawRun, sid: str) -> None:
    await run.agent_sends(request_line(3, qwen("qwen-plan", sid)))
    (p,) = await wait_prompts(station, sid, 1)
    c = p["content"]
    assert c["body"].startswith("Plan to approve") and "│ 1. Write a.txt" in c["body"]
    labels = [o["label"] for o in c["options"]]
    assert labels[-1] == "No, keep planning (esc)" and c["options"][0]["meaning"] == "approve"
    assert "restore previous mode (auto)" in c["body"] and "manually approve edits" in c["body"]
    assert (await record(station, c["request_id"]))["kind"] == "plan"
    await answer(station, p, "1")
    reply = await run.agent_reply(3)
    assert reply["result"]["outcome"]["outcome"] == "selected"
    assert reply["result"]["outcome"]["optionId"] == c["options"][0]["id"]
    assert "answers" not in reply["result"]
