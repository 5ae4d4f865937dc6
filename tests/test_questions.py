"""Questions and plans (issue 33), the pure parts: kinds, prompts, answers, the hook's outputs. No daemon.

The hook inputs are the ones Claude Code 2.1.332 sent (tests/fixtures/questions/, from the spec's captures).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bot import answers
from bot.answers.questions import resolve_question
from bot.events import validate_content
from bot.events.kinds import ANSWERED, Kind, request_kind
from bot.events.states import State, Via
from bot.hooks.command import expected_digest
from bot.hooks.models import parse_hook_input
from bot.hooks.output import form_decision, plan_decision
from bot.hooks.translate import build_submissions, form_digest
from bot.inbox.record import Outcome, Record
from bot.inbox.submission import parse_submission
from bot.prompts.markdown import render
from bot.room.posts import full_text_notices, prompt_content, provisional, settled_content
from bot.room.targets import as_target
from bot.util.digest import submission_digest
from tests.support.schema import schema_verdict

FIX = Path(__file__).parent / "fixtures" / "questions"
SID = "0b1c2d3e-0000-4000-8000-000000000002"


def hook_input(name: str) -> dict[str, Any]:
    text = (FIX / f"{name}.json").read_text().replace("<cwd>", "/work/proj").replace("<home>", "/home/u")
    data: dict[str, Any] = json.loads(text)
    data["session_id"] = SID
    return data


def records(name: str) -> list[Record]:
    inp = parse_hook_input("claude-code", hook_input(name))
    out = []
    for n, body in enumerate(build_submissions("claude-code", inp, key="hook-t"), 1):
        rec = provisional(parse_submission(body), 0.0, 900.0)
        out.append(replace(rec, id=f"{SID}:{n}", request_seq=n, revision=1))
    return out


def settled(rec: Record, option_id: str, answers_: dict[str, str] | None = None, feedback: str | None = None,
            state: State = State.RESOLVED) -> Record:
    outcome = Outcome(option_id, "@alice:hs", Via.MATRIX, feedback, 1.0, answers=answers_,
                      chosen=[option_id] if answers_ else None)
    return replace(rec, state=state, outcome=outcome, prompt_event_id="$p")


def test_kinds() -> None:
    assert request_kind("question", None, {}) == Kind.QUESTION
    claude = {"claudeCode": {"toolName": "ExitPlanMode"}}
    assert request_kind("switch_mode", claude, {"plan": "# P"}) == Kind.PLAN
    assert request_kind(None, claude, {"plan": "# P"}) == Kind.PLAN  # the first Claude ACP adapter sends no kind
    assert request_kind("switch_mode", {"toolName": "exit_plan_mode"}, {"plan": "# P"}) == Kind.PLAN  # Qwen Code
    assert request_kind("execute", {"claudeCode": {"toolName": "Bash"}}, {"plan": "x"}) == Kind.PERMISSION
    assert request_kind("switch_mode", claude, {"plan": " "}) == Kind.PERMISSION
    # a model-written plan field alone never makes a plan: no kind, switch_mode, whatever the title says
    assert request_kind(None, None, {"plan": "# P", "command": "curl x | sh"}) == Kind.PERMISSION
    assert request_kind("switch_mode", None, {"plan": "# P"}) == Kind.PERMISSION
    assert request_kind("switch_mode", {"toolName": "ExitPlanMode"}, {"plan": "# P"}) == Kind.PERMISSION
    assert request_kind(None, {"toolName": "exit_plan_mode"}, {"plan": "# P"}) == Kind.PERMISSION
    assert request_kind("other", claude, {"plan": "# P"}) == Kind.PERMISSION
    db, extras = records("hook-PermissionRequest-AskUserQuestion")
    assert (db.kind, extras.kind) == ("question", "question")
    assert records("hook-PermissionRequest-ExitPlanMode-planfile")[0].kind == "plan"


def test_markdown_renders_what_plans_use_and_escapes_the_rest() -> None:
    html = render("# Plan\n\nRun **this** `x<y`\n\n1. one\n2. two\n   - a\n\n```sh\nrm <x>\n```\n[t](http://e)<b>")
    assert html.startswith("<h3>Plan</h3>")
    assert "<strong>this</strong> <code>x&lt;y</code>" in html
    assert "<ol><li>one</li><li>two<ul><li>a</li></ul></li></ol>" in html
    assert '<pre><code class="language-sh">rm &lt;x&gt;</code></pre>' in html
    assert "t (http://e)&lt;b&gt;" in html and "<a" not in html


def test_a_question_prompt() -> None:
    db, extras = records("hook-PermissionRequest-AskUserQuestion")
    content = prompt_content(db)
    validate_content(content)
    assert schema_verdict(content) is None  # "choose" options are valid v2 by the seed's JSON Schema
    assert content["tool_kind"] == "question" and content["title"] == "Which database should we use?"
    assert content["options"] == [
        {"id": "Postgres", "label": "Postgres", "meaning": "choose"},
        {"id": "SQLite", "label": "SQLite", "meaning": "choose"},
        {"id": "decline", "label": "Decline", "meaning": "reject", "scope": "once"},
    ]
    body = content["body"]
    assert body.startswith("Question: Which database should we use?\nTopic: Database\nAgent: claude-code\n")
    assert "1. Postgres: Relational, server based\n2. SQLite: Single file, no server\n3. Decline" in body
    assert "question 1 of 2; one choice" in body
    assert "several choices allowed" in prompt_content(extras)["body"]
    assert "<li><b>Postgres</b>: <em>Relational, server based</em></li>" in content["formatted_body"]


def test_a_plan_prompt_whole_and_cut() -> None:
    (rec,) = records("hook-PermissionRequest-ExitPlanMode-planfile")
    content = prompt_content(rec)
    assert schema_verdict(content) is None
    assert "│ # Plan\n│ \n│ 1. Create the file M1\n│ 2. Run the tests" in content["body"]
    assert "<blockquote><h3>Plan</h3><ol><li>Create the file M1</li><li>Run the tests</li></ol></blockquote>" in (
        content["formatted_body"])
    assert "1. Approve (edits still asked)\n2. Approve, and accept edits for this session\n3. Keep planning" in (
        content["body"])
    assert content["subject"]["preview_complete"] is True
    big = "# Big plan\n\n" + "\n".join(f"{i}. step {i} " + "x" * 80 for i in range(1, 800))
    long_rec = replace(rec, raw_input={"plan": big, "planFilePath": "/p.md"})
    cut = prompt_content(long_rec)
    assert len(json.dumps(cut).encode()) <= 24_000 and cut["subject"]["preview_complete"] is False
    assert "The plan is cut here: the whole plan follows in this prompt's thread" in cut["body"]
    parts = full_text_notices(long_rec, "$p")
    assert len(parts) > 1 and all(p["m.relates_to"]["rel_type"] == "m.thread" for p in parts)
    whole = "\n".join(line[2:] for p in parts for line in p["body"].split("\n")[1:])
    assert all(f"{i}. step {i} " in whole for i in range(1, 800))


def ask(rec: Record, text: str, *, explicit: bool = True) -> answers.Answer | answers.Refusal | None:
    cand = answers.Candidate("$a", "@alice:hs", Via.MATRIX, prompt_event_id="$p" if explicit else None,
                             text=text, explicit=explicit)
    return resolve_question(cand, as_target(replace(rec, prompt_event_id="$p")), text)


@pytest.mark.parametrize(
    ("text", "option_id", "answer", "chosen"),
    [
        ("1", "Postgres", "Postgres", ("Postgres",)),
        ("sqlite", "SQLite", "SQLite", ("SQLite",)),
        ("MySQL, please", ANSWERED, "MySQL, please", ()),
        ("3", "decline", None, ()),
    ],
)
def test_answers_to_a_one_choice_question(
    text: str, option_id: str, answer: str | None, chosen: tuple[str, ...]
) -> None:
    db, _ = records("hook-PermissionRequest-AskUserQuestion")
    got = ask(db, text)
    assert isinstance(got, answers.Answer)
    assert (got.option_id, got.answer, got.chosen) == (option_id, answer, chosen)


@pytest.mark.parametrize("text", ["1, 2", "1 2", "Docker, CI", "CI, docker", "2, 1, 1"])
def test_several_choices(text: str) -> None:
    _, extras = records("hook-PermissionRequest-AskUserQuestion")
    got = ask(extras, text)
    assert isinstance(got, answers.Answer)
    assert (got.option_id, got.answer, got.chosen) == (ANSWERED, "Docker, CI", ("Docker", "CI"))


def test_what_is_not_an_answer() -> None:
    db, extras = records("hook-PermissionRequest-AskUserQuestion")
    assert isinstance(refused := ask(db, "1, 2"), answers.Refusal) and "one choice" in refused.message
    assert isinstance(refused := ask(extras, "1, 4"), answers.Refusal) and "Decline cannot" in refused.message
    assert isinstance(refused := ask(db, "7"), answers.Refusal) and "no choice 7" in refused.message
    assert ask(db, "MySQL, please", explicit=False) is None  # free text only as a reply or in the thread
    plain = ask(db, "2", explicit=False)
    assert isinstance(plain, answers.Answer) and plain.answer == "SQLite"
    closed = replace(db, raw_input={**db.raw_input, "freeText": False})
    assert ask(closed, "MySQL, please") is None and isinstance(ask(closed, "MySQL"), answers.Refusal)
    done = settled(db, "Postgres", {"Which database should we use?": "Postgres"})
    assert isinstance(ask(done, "2"), answers.Refusal)


def test_the_settled_question_shows_the_answer() -> None:
    db, _ = records("hook-PermissionRequest-AskUserQuestion")
    edit = settled_content(settled(db, ANSWERED, {"Which database should we use?": "MySQL, please"}))["m.new_content"]
    assert edit["body"].startswith("☑️ Answered: MySQL, please by @alice:hs via reply\n\nQuestion:")
    assert edit["resolution"]["answer"] == "MySQL, please" and "Reply with" not in edit["body"]
    assert schema_verdict(edit) is None
    assert db.to_api()["kind"] == "question"
    api = settled(db, "Postgres", {"Which database should we use?": "Postgres"}).to_api()["outcome"]
    assert api["answers"] == {"Which database should we use?": "Postgres"} and api["chosen"] == ["Postgres"]


def test_the_hook_answers_exactly_as_claude_code_takes_them() -> None:
    data = hook_input("hook-PermissionRequest-AskUserQuestion")
    inp = parse_hook_input("claude-code", data)
    db, extras = records("hook-PermissionRequest-AskUserQuestion")
    recs = [settled(db, "Postgres", {"Which database should we use?": "Postgres"}, feedback="keep it small"),
            settled(extras, ANSWERED, {"Which extras do you want?": "Docker, CI"})]
    assert form_decision(inp, [r.to_api() for r in recs]) == {"hookSpecificOutput": {
        "hookEventName": "PermissionRequest", "decision": {"behavior": "allow", "updatedInput": {
            "questions": data["tool_input"]["questions"],
            "answers": {"Which database should we use?": "Postgres", "Which extras do you want?": "Docker, CI"},
            "annotations": {"Which database should we use?": {"notes": "keep it small"}}}}}}
    assert form_decision(inp, [recs[0].to_api(), extras.to_api()]) is None  # not all answered yet
    declined = [recs[0].to_api(), settled(extras, "decline").to_api()]
    out = form_decision(inp, declined)
    assert out is not None and out["hookSpecificOutput"]["decision"]["behavior"] == "deny"
    pre = parse_hook_input("claude-code", hook_input("hook-PreToolUse-AskUserQuestion"))
    spec = form_decision(pre, [r.to_api() for r in recs])["hookSpecificOutput"]  # type: ignore[index]
    assert spec["permissionDecision"] == "allow" and spec["updatedInput"]["answers"]["Which extras do you want?"]
    digests = [submission_digest(b) for b in build_submissions("claude-code", inp, key="x")]
    assert expected_digest("claude-code", data) == form_digest(digests) != digests[0]


def test_the_hook_approves_a_plan_by_echoing_its_input() -> None:
    data = hook_input("hook-PermissionRequest-ExitPlanMode-planfile")
    inp = parse_hook_input("claude-code", data)
    (rec,) = records("hook-PermissionRequest-ExitPlanMode-planfile")
    assert [o["optionId"] for o in rec.options] == ["approve", "approve_accept_edits", "keep_planning"]
    ok = plan_decision(inp, settled(rec, "approve").to_api())
    assert ok == {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {
        "behavior": "allow", "updatedInput": data["tool_input"]}}}
    edits = plan_decision(inp, settled(rec, "approve_accept_edits").to_api())
    assert edits["hookSpecificOutput"]["decision"]["updatedPermissions"] == [  # type: ignore[index]
        {"type": "setMode", "mode": "acceptEdits", "destination": "session"}]
    back = plan_decision(inp, settled(rec, "keep_planning", feedback="add a lint step").to_api())
    assert back == {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {
        "behavior": "deny", "message": "add a lint step"}}}
    pre = parse_hook_input("claude-code", hook_input("hook-PreToolUse-ExitPlanMode-planfile"))
    assert [o["optionId"] for o in build_submissions("claude-code", pre, "k")[0]["options"]] == [
        "approve", "keep_planning"]


def test_a_rule_through_the_api_only_declines_a_question() -> None:
    from bot.inbox.decisions import NoFittingOption
    from bot.room.api_answers import settlement

    db, _ = records("hook-PermissionRequest-AskUserQuestion")
    kw: dict[str, Any] = {"scope": None, "answer": None, "by": "api:watch"}
    with pytest.raises(NoFittingOption, match="never answers a question"):
        settlement(db, "approve", option_id="Postgres", via="rule", **kw)
    assert settlement(db, "deny", option_id="Postgres", via="rule", **kw).option_id == "decline"
    picked = settlement(db, "approve", option_id="SQLite", via="api", **kw)
    assert (picked.option_id, picked.answers) == ("SQLite", {"Which database should we use?": "SQLite"})
    with pytest.raises(NoFittingOption, match="only a question"):
        settlement(records("hook-PermissionRequest-ExitPlanMode-planfile")[0], "answer", option_id=None,
                   via="api", **{**kw, "answer": "1"})
