"""The real Qwen Code CLI's questions and plans through ``permission-bot acp``, in the real Synapse.

``qwen --acp --approval-mode default`` (pinned in ``tests/agents-npm``, started as docs/agents.md says by
``tests.support.agent_setups``), offline against the scripted Chat Completions model; one process, one session,
three turns one after another, each answered by alice in the room:

* the model calls ``ask_user_question`` (Postgres or SQLite); ``2`` picks SQLite and the model reads Qwen's
  ``User has provided the following answers`` with it (so the reply's top-level ``answers`` reached Qwen);
* another question answered in alice's own words, replying to the prompt: the model reads those words;
* the model enters plan mode (``enter_plan_mode``, allowed unasked) and calls ``exit_plan_mode``: posted as a
  plan, approved with ``1``; the model reads ``User approved``.

A failure, never a skip, when Qwen Code is missing and ``PB_REAL_AGENTS`` is ``required``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.support.agent_setups import SETUPS
from tests.support.model_api import ModelApi
from tests.support.scripted_model import scripted
from tests.test_real_agents_e2e import Run, model_api  # noqa: F401 (the fixture)
from tests.test_real_agents_matrix_e2e import WAIT, _prompt, _settled

QWEN = SETUPS["qwen"]
REQUIRED = os.environ.get("PB_REAL_AGENTS") == "required"
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not QWEN.exe.exists() and not REQUIRED, reason="tests/agents-npm not installed"),
]


def _ask(question: str, header: str, *labels: str) -> dict[str, Any]:
    """The model's ``ask_user_question`` call with one single-choice question."""
    options = [{"label": label, "description": f"The {label} one"} for label in labels]
    return {"tool": "ask_user_question",
            "args": {"questions": [{"question": question, "header": header, "options": options,
                                    "multiSelect": False}]}}


PLAN = "# Plan\n1. Write a.txt\n2. Run the tests"
TURNS = [
    scripted([_ask("Which database should we use?", "Database", "Postgres", "SQLite")], "Ask me."),
    scripted([_ask("What should the service be called?", "Name", "api", "web")], "Ask me."),
    scripted([{"tool": "enter_plan_mode", "args": {}}, {"tool": "exit_plan_mode", "args": {"plan": PLAN}}],
             "Plan it."),
]


def _told(api: ModelApi, text: str) -> list[str]:
    """The tool results the model was sent that hold ``text``."""
    return [r for r in api.tool_results if text in r]


async def test_real_qwen_questions_and_plan_answered_in_the_room(
    station: Any, model_api: ModelApi, tmp_path: Path  # noqa: F811
) -> None:
    if not QWEN.exe.exists():
        pytest.fail(f"{QWEN.exe} is missing: run `npm ci --ignore-scripts` in tests/agents-npm")
    args, env = QWEN.offline(model_api.url, tmp_path / "home")
    cmd = [str(QWEN.exe), *QWEN.command[1:], *args]
    run = await Run.start(station, model_api, tmp_path, "qwen", agent=(cmd, {**env, "PATH": os.environ["PATH"]}),
                          prompts=TURNS)
    seen: list[str] = []
    try:
        # (1) a choice, by number: Postgres, SQLite, decline
        p, rec = await _prompt(station, run, seen, "Which database should we use?")
        c = p["content"]
        assert rec["kind"] == "question" and c["tool_kind"] == "question"
        assert [o["id"] for o in c["options"]] == ["Postgres", "SQLite", "decline"]
        await station.alice.text("2", reply_to=p["event_id"])
        got = await _settled(station, rec["id"])
        assert got["outcome"]["answers"] == {"Which database should we use?": "SQLite"}, got

        # (2) the person's own words, as a reply to the prompt
        p, rec = await _prompt(station, run, seen, "What should the service be called?")
        assert rec["kind"] == "question"
        await station.alice.text("harbor-svc please", reply_to=p["event_id"])
        got = await _settled(station, rec["id"])
        assert got["outcome"]["answers"] == {"What should the service be called?": "harbor-svc please"}, got

        # (3) a plan, approved with 1
        p, rec = await _prompt(station, run, seen, "Write a.txt")
        c = p["content"]
        assert rec["kind"] == "plan" and c["body"].startswith("Plan to approve"), (rec["kind"], c["body"])
        assert c["options"][0]["meaning"] == "approve"
        await station.alice.text("1", reply_to=p["event_id"])
        got = await _settled(station, rec["id"])
        assert got["outcome"]["option_id"] == c["options"][0]["id"], got

        done = await run.done(model_api, WAIT)
        assert done["stop_reasons"] == ["end_turn"] * 3, done
        assert done["client_permission_requests"] == 0, done  # all answered in the room
        answered = "User has provided the following answers:\n\n"
        assert len(_told(model_api, answered + "**Database**: SQLite")) == 1, model_api.tool_results
        assert len(_told(model_api, answered + "**Name**: harbor-svc please")) == 1, model_api.tool_results
        assert not _told(model_api, "No valid answers"), model_api.tool_results
        assert len(_told(model_api, "User approved")) == 1, model_api.tool_results
    finally:
        await run.client.close()
