"""Every agent's real requests (tests/fixtures/agents/, the params the real CLIs sent; FACTS.md of the agents
spec): which are plans and questions, option 1 is allow once, and what an option really does is said. Pure."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bot.acp import qwen
from bot.answers.outcomes import session_index
from bot.door import forms, outcomes
from bot.events import validate_content
from bot.inbox.record import Record
from bot.inbox.submission import parse_submission
from bot.room.posts import prompt_content, provisional
from bot.room.targets import as_target

FIX = Path(__file__).parent / "fixtures" / "agents"
QUESTIONS = Path(__file__).parent / "fixtures" / "questions"
PROXY_KEY = "0123456789abcdef" * 2 + ":1"  # what the proxy sets: session lines are offered on such requests


def params(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIX / f"{name}.json").read_text())
    return data


def record(body: dict[str, Any]) -> Record:
    rec = provisional(parse_submission({**body, "key": PROXY_KEY}), 0.0, 900.0)
    return replace(rec, id=f"{rec.session_id}:1", request_seq=1, revision=1)


def claude(name: str) -> dict[str, Any]:
    """A Claude ACP adapter's captured request (its session id made a real one)."""
    data: dict[str, Any] = json.loads((QUESTIONS / f"{name}.json").read_text())
    return {**data, "sessionId": "0b1c2d3e-0000-4000-8000-000000000009"}


def lines(rec: Record) -> list[str]:
    body = str(prompt_content(rec)["body"])
    return [ln for ln in body.split("\n") if ln[:2] in {f"{n}." for n in range(1, 10)}]


@pytest.mark.parametrize(("name", "once"), [
    ("qwen-shell", "proceed_once"), ("gemini-shell", "proceed_once"), ("codex-exec", "approved"),
    ("codex-patch", "approved"), ("opencode-bash", "once"), ("copilot-shell", "allow_once"),
])
def test_option_1_is_allow_once_for_every_agent(name: str, once: str) -> None:
    rec = record(params(name))
    content = prompt_content(rec)
    validate_content(content)
    assert content["options"][0]["id"] == once and content["options"][0]["meaning"] == "approve"
    assert as_target(rec).options[0][0] == once
    assert rec.kind == "permission"


def test_codex_says_its_always_is_a_rule_for_later_sessions_and_abort_drops_feedback() -> None:
    shown = lines(record(params("codex-exec")))
    assert shown[0] == "1. Yes, proceed"
    assert shown[1].startswith("2. Yes, and don't ask again") and "every later session" in shown[1]
    assert shown[2].startswith("3. No, and tell Codex what to do differently")
    assert "never reach Codex" in shown[2]
    patch = lines(record(params("codex-patch")))
    assert patch[0] == "1. Yes" and "never reach Codex" in patch[1]


def test_qwen_shows_both_scopes_of_always_as_two_lines() -> None:
    shown = lines(record(params("qwen-shell")))
    assert shown[0] == "1. Allow"
    assert shown[1].startswith("2. Always Allow in project: echo *") and "scope: this project" in shown[1]
    assert shown[2].startswith("3. Always Allow for user: echo *") and "every project of yours" in shown[2]
    assert shown[3].startswith("4. Reject") and "never reach Qwen" in shown[3]
    assert len(shown) == 5 and "Allow for this session (this command)" in shown[4]  # the bot's own, exact


def test_gemini_has_one_line_named_allow_for_this_session() -> None:
    rec = record(params("gemini-shell"))
    shown = lines(rec)
    assert shown == ["1. Allow", "2. Allow for this session", "3. Reject"]
    target = as_target(rec)
    assert target.session is None and session_index(target) == 1  # `s` picks Gemini's own
    opencode = lines(record(params("opencode-bash")))  # an agent without one keeps the bot's line
    assert opencode[-1].endswith("Allow for this session (this command)") and "never reach OpenCode" in opencode[2]


def test_qwen_plan_is_a_plan_and_says_what_each_approval_switches_to() -> None:
    rec = record(params("qwen-plan"))
    assert rec.kind == "plan"
    content = prompt_content(rec)
    body = content["body"]
    assert body.startswith("Plan to approve") and "│ 1. Write a.txt" in body
    shown = lines(rec)
    assert shown[0].startswith("1. Yes, restore previous mode (auto)") and "nothing is asked" in shown[0]
    assert shown[1].startswith("2. Yes, and manually approve edits") and "edits are still asked" in shown[1]
    assert shown[2].startswith("3. Yes, and auto-accept edits") and "without asking" in shown[2]
    assert shown[3].startswith("4. No, keep planning (esc)") and "never reach Qwen" in shown[3]
    assert content["subject"]["preview_complete"] is True
    # the same request with no harness mark, or the mark on another kind, is no plan
    unmarked = params("qwen-plan")
    del unmarked["toolCall"]["_meta"]
    assert record(unmarked).kind == "permission"
    other = params("qwen-plan")
    other["toolCall"]["kind"] = "execute"
    assert record(other).kind == "permission"


def test_claude_adapters_plans_are_plans_from_their_meta() -> None:
    a101 = claude("acp101-request_permission-ExitPlanMode")
    assert record(a101).kind == "permission"  # its own fields name no harness: alone, no plan
    ctx = {"_meta": {"claudeCode": {"toolName": "ExitPlanMode"}}}  # the proxy adds what the tool_call update said
    assert record({**a101, "toolCallContext": ctx}).kind == "plan"
    a16 = claude("acp16-request_permission-ExitPlanMode")
    assert record({**a16, "toolCallContext": {**ctx, "kind": "switch_mode"}}).kind == "plan"
    assert record({**a16, "toolCallContext": {"kind": "switch_mode"}}).kind == "permission"


def test_a_plan_prompt_shows_the_plan_files_path() -> None:
    a101 = claude("acp101-request_permission-ExitPlanMode")
    ctx = {"_meta": {"claudeCode": {"toolName": "ExitPlanMode"}}}
    content = prompt_content(record({**a101, "toolCallContext": ctx}))
    assert "planFilePath" in content["body"] and content["body"].count("1. Create the file M1") == 1


def test_qwen_question_as_a_form_and_its_answers() -> None:
    p = params("qwen-question")
    assert qwen.is_user_question(p)
    assert not qwen.is_user_question(params("qwen-shell"))
    form = qwen.form_of(p["toolCall"]["_meta"]["qwenQuestions"])
    (ask,) = form.asks
    assert (ask.key, ask.kind, ask.text, ask.header) == ("0", "single", "Which database should we use?", "Database")
    assert [c.value for c in ask.choices] == ["Postgres", "SQLite"] and ask.free_text
    assert qwen.answers_of(form, {"0": "SQLite"}) == {"0": "SQLite"}
    assert qwen.answers_of(form, {"0_custom": "DuckDB"}) == {"0": "DuckDB"}
    multi = qwen.form_of([{"question": "Which?", "options": [{"label": "A"}, {"label": "B"}], "multiSelect": True}])
    assert qwen.answers_of(multi, {"0": ["A", "B"]}) == {"0": "A, B"}
    assert outcomes.option_of(p["options"], "allow_once") == "proceed_once"
    assert outcomes.option_of(p["options"], "reject_once") == "cancel"
    long = qwen.form_of([{"question": "Which?", "options": [{"label": "x" * 300}, {"label": "decline"}]}])
    assert [c.value for c in long.asks[0].choices] == ["choice 1", "choice 2"]
    assert qwen.answers_of(long, {"0": "choice 2"}) == {"0": "decline"}
    for bad in ([], "x", [{"question": ""}], [{"header": "no question"}]):
        with pytest.raises(forms.BadForm):
            qwen.form_of(bad)
