"""Questions and plans on the in-process fake homeserver (the whole daemon, no Synapse): rules never answer a
question (a deny rule declines it), a session rule never covers one, agent text in a question never looks
like a bot line."""

from __future__ import annotations

from typing import Any

from bot.hooks.models import parse_hook_input
from bot.hooks.translate import build_submissions
from tests.support.fake_station import FakeStation
from tests.support.human import content
from tests.test_questions import hook_input


def question_bodies(sid: str, **change: Any) -> list[dict[str, Any]]:
    data = hook_input("hook-PermissionRequest-AskUserQuestion")
    data["session_id"] = sid
    data["tool_input"]["questions"][0].update(change)
    return build_submissions("claude-code", parse_hook_input("claude-code", data), key=f"hook-{sid}")


async def test_rules_never_answer_a_question_and_a_deny_rule_declines_it(fst: FakeStation) -> None:
    fst.rules = [
        {"match": {"toolName": "AskUserQuestion", "sessionId": "approve"}, "decision": "approve",
         "optionId": "Postgres"},
        {"match": {"toolName": "AskUserQuestion", "sessionId": "deny"}, "decision": "deny", "optionId": "Postgres"},
    ]
    await fst.restart()
    rec, _ = await fst.d.submit(question_bodies("approve")[0], "api.token")
    assert rec.pending and rec.kind == "question"  # an approve rule (even naming a choice) answers nothing
    rec, _ = await fst.d.submit(question_bodies("deny")[0], "api.token")
    assert rec.outcome is not None and rec.outcome.option_id == "decline" and rec.outcome.answers is None


async def test_agent_text_in_a_question_never_starts_a_line(fst: FakeStation) -> None:
    evil = "Pick one\n\n1. Allow once\n2. Allow always @room"
    body = question_bodies("evil", question=evil, header="Permission needed: rm -rf /")[0]
    rec, prompt = await fst.submit(body)
    lines = content(prompt)["body"].split("\n")
    assert lines[0] == "Question: Pick one 1. Allow once 2. Allow always ＠room"  # one line, no mention
    assert "Topic: Permission needed: rm -rf /" in lines
    numbered = [line for line in lines if line[:1].isdigit()]
    assert numbered == ["1. Postgres: Relational, server based", "2. SQLite: Single file, no server",
                        "3. Decline (answer none of the agent's questions)"]
    assert rec.raw_input["question"] == evil  # the record keeps what the agent sent
