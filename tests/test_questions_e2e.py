"""Questions and plans end to end (issue 33): `permission-bot hook claude-code` with the inputs Claude Code
2.1.332 sent (tests/fixtures/questions/), the real daemon and Synapse; answers given in the room.

The hook's output is checked to be exactly what FACTS.md shows Claude Code takes: the answers in
``updatedInput.answers`` (the questions unchanged), a plan approved by echoing ``tool_input``, accept edits by
``setMode``, keep planning as a ``deny`` whose ``message`` is the person's feedback.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from bot.answers import KEYCAPS
from tests.support.human import content
from tests.support.station import AGENT_TOKEN, DECIDER_TOKEN, Station
from tests.test_hooks_e2e import finish, start_hook

pytestmark = pytest.mark.e2e
FIX = Path(__file__).parent / "fixtures" / "questions"
Q1, Q2 = "Which database should we use?", "Which extras do you want?"


def hook_input(name: str, sid: str) -> dict[str, Any]:
    text = (FIX / f"{name}.json").read_text().replace("<cwd>", "/work/proj").replace("<home>", "/home/u")
    data: dict[str, Any] = json.loads(text)
    data["session_id"] = sid
    return data


async def form(station: Station, sid: str, name: str = "hook-PermissionRequest-AskUserQuestion") -> tuple[
    asyncio.subprocess.Process, dict[str, Any], dict[str, Any], dict[str, Any]
]:
    """The hook asking the two-question form; its input and both prompts."""
    data = hook_input(name, sid)
    proc = await start_hook(station, data)
    first = await station.prompt_for(sid, seq=1)
    second = await station.prompt_for(sid, seq=2)
    assert first and second, "no prompts"
    return proc, data, first, second


def answered(data: dict[str, Any], answers: dict[str, str], event: str = "PermissionRequest") -> dict[str, Any]:
    updated = {"questions": data["tool_input"]["questions"], "answers": answers}
    if event == "PreToolUse":
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                                       "permissionDecisionReason": "Answered in the permission room.",
                                       "updatedInput": updated}}
    return {"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                                   "decision": {"behavior": "allow", "updatedInput": updated}}}


async def test_a_form_answered_by_number(station: Station, sid: str) -> None:
    proc, data, first, second = await form(station, sid)
    c = content(first)
    assert c["tool_kind"] == "question" and [o["meaning"] for o in c["options"]] == ["choose", "choose", "reject"]
    assert "1. Postgres: Relational, server based" in c["body"] and "3. Decline" in c["body"]
    assert "several choices allowed" in content(second)["body"]
    _, listed = await station.ahttp("GET", f"/permissions?session={sid}")
    assert [r["kind"] for r in listed] == ["question", "question"]
    await station.bob.text("2", reply_to=first["event_id"])  # attack: bob may not answer
    await station.alice.text("1", reply_to=first["event_id"])
    await station.alice.text("1, 2", reply_to=second["event_id"])
    code, out, _ = await finish(proc)
    assert code == 0 and out == answered(data, {Q1: "Postgres", Q2: "Docker, CI"})
    rec = await station.record(f"{sid}:2")
    assert rec["kind"] == "question" and rec["outcome"]["answers"] == {Q2: "Docker, CI"}
    assert rec["outcome"]["chosen"] == ["Docker", "CI"] and rec["outcome"]["answered_by"].startswith("@alice")
    edit = await station.edit_of(second["event_id"])
    assert edit and content(edit)["m.new_content"]["body"].startswith("☑️ Answered: Docker, CI by @alice")


async def test_a_form_answered_by_label_free_text_and_reaction(station: Station, sid: str) -> None:
    proc, data, first, second = await form(station, sid, "hook-PreToolUse-AskUserQuestion")
    await station.alice.text("MySQL, please", thread=first["event_id"])  # free text, in the prompt's thread
    await station.alice.text("docker, docs", reply_to=second["event_id"])  # labels, any case
    code, out, _ = await finish(proc)
    assert code == 0 and out == answered(data, {Q1: "MySQL, please", Q2: "Docker, Docs"}, "PreToolUse")
    sid2 = sid + "b"
    proc, data, first, second = await form(station, sid2)
    await station.alice.text("SQLite - keep it small", reply_to=first["event_id"])  # a note with the choice
    await station.alice.react(second["event_id"], KEYCAPS[1])  # 2️⃣: CI
    code, out, _ = await finish(proc)
    want = answered(data, {Q1: "SQLite", Q2: "CI"})
    want["hookSpecificOutput"]["decision"]["updatedInput"]["annotations"] = {Q1: {"notes": "keep it small"}}
    assert code == 0 and out == want


async def test_decline_declines_the_whole_form(station: Station, sid: str) -> None:
    proc, _, first, second = await form(station, sid)
    await station.alice.text("decline", reply_to=second["event_id"])
    code, out, _ = await finish(proc)
    assert code == 0 and out["hookSpecificOutput"]["decision"]["behavior"] == "deny"
    assert (await station.record(f"{sid}:1"))["state"] == "cancelled"  # the other question is withdrawn
    assert await station.edit_of(first["event_id"])


async def test_answer_from_the_cli_and_the_api(station: Station, sid: str) -> None:
    proc, data, _, _ = await form(station, sid)
    answer_1 = {"decision": "answer", "answer": "1"}
    st, _ = await station.ahttp("POST", f"/permissions/{sid}:1", answer_1, token=AGENT_TOKEN[1])
    assert st == 403  # the agent token never answers
    st, body = await station.ahttp("POST", f"/permissions/{sid}:1", {"decision": "approve", "via": "rule"})
    assert st == 409  # nothing allow-flavoured, and a rule never answers a question
    st, body = await station.ahttp("POST", f"/permissions/{sid}:1", {"decision": "answer", "answer": "1, 2"})
    assert st == 409 and "one choice" in body["reason"]
    env = {"PERMISSION_BOT_TOKEN": DECIDER_TOKEN[1]}
    done = station.cli("permissions", "ls", "--session", sid, env={**env, "COLUMNS": "200"})  # shared station
    assert f"[question] {Q1}" in done.stdout, done.stdout
    done = station.cli("permissions", "answer", f"{sid}:1", "Postgres", env=env)
    assert done.returncode == 0 and f"answered {sid}:1: Postgres" in done.stdout, done.stderr
    done = station.cli("permissions", "answer", f"{sid}:2", "Docker, CI", "--json", env=env)
    assert json.loads(done.stdout)["outcome"]["answered_by"] == "api:alice-cli"
    code, out, _ = await finish(proc)
    assert code == 0 and out == answered(data, {Q1: "Postgres", Q2: "Docker, CI"})
    done = station.cli("permissions", "answer", f"{sid}:2", "CI", env=env)
    assert done.returncode == 1 and "HTTP 404" in done.stderr


async def test_a_lone_question_takes_a_plain_number_not_plain_chat(station: Station, sid: str) -> None:
    await station.drain()
    data = hook_input("hook-PermissionRequest-AskUserQuestion", sid)
    data["tool_input"]["questions"] = data["tool_input"]["questions"][:1]
    proc = await start_hook(station, data)
    prompt = await station.prompt_for(sid, seq=1)
    assert prompt
    await station.alice.text("MySQL, please")  # plain chat: free text needs a reply or the thread
    _, rec = await station.ahttp("GET", f"/permissions/{sid}:1?wait=2")
    assert rec["state"] == "pending"
    await station.alice.text("2")
    code, out, _ = await finish(proc)
    assert code == 0 and out == answered(data, {Q1: "SQLite"})


@pytest.mark.parametrize(
    ("answer", "decision"),
    [
        ("1", {"behavior": "allow", "updatedInput": "ECHO"}),
        ("2", {"behavior": "allow", "updatedInput": "ECHO",
               "updatedPermissions": [{"type": "setMode", "mode": "acceptEdits", "destination": "session"}]}),
        ("3 - add a step that runs the linter", {"behavior": "deny", "message": "add a step that runs the linter"}),
    ],
    ids=["approve", "accept-edits", "keep-planning"],
)
async def test_a_plan(station: Station, sid: str, answer: str, decision: dict[str, Any]) -> None:
    data = hook_input("hook-PermissionRequest-ExitPlanMode-planfile", sid)
    proc = await start_hook(station, data)
    prompt = await station.prompt_for(sid)
    assert prompt
    c = content(prompt)
    assert "│ # Plan" in c["body"] and "│ 2. Run the tests" in c["body"]
    assert "<h3>Plan</h3><ol><li>Create the file M1</li><li>Run the tests</li></ol>" in c["formatted_body"]
    assert "3. Keep planning" in c["body"]
    await station.alice.text(answer, reply_to=prompt["event_id"])
    code, out, _ = await finish(proc)
    if decision.get("updatedInput") == "ECHO":
        decision = {**decision, "updatedInput": data["tool_input"]}
    assert code == 0 and out == {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}}
    assert (await station.record(f"{sid}:1"))["kind"] == "plan"


async def test_a_long_plan_is_cut_and_whole_in_its_thread(station: Station, sid: str) -> None:
    data = hook_input("hook-PermissionRequest-ExitPlanMode-planfile", sid)
    data["tool_input"]["plan"] = "# Long plan\n\n" + "\n".join(f"{i}. step {i} " + "y" * 90 for i in range(1, 600))
    proc = await start_hook(station, data)
    prompt = await station.prompt_for(sid)
    assert prompt, await finish(proc)
    assert "the whole plan follows in this prompt's thread" in content(prompt)["body"]
    parts = await station.alice.wait(
        lambda e: content(e).get("m.relates_to", {}).get("event_id") == prompt["event_id"]
        and "part 2 of" in content(e).get("body", ""), 20)
    assert parts
    await station.alice.text("1", reply_to=prompt["event_id"])
    code, out, _ = await finish(proc)
    assert code == 0
    assert out["hookSpecificOutput"]["decision"]["updatedInput"]["plan"] == data["tool_input"]["plan"]


async def test_the_http_hook_route_answers_a_question(station: Station, sid: str) -> None:
    data = hook_input("hook-PermissionRequest-AskUserQuestion", sid)
    data["tool_input"]["questions"] = data["tool_input"]["questions"][1:]  # the multi-select one alone
    call = asyncio.ensure_future(station.ahttp("POST", "/hooks/claude-code", data, token=AGENT_TOKEN[1]))
    prompt = await station.prompt_for(sid, seq=1)
    assert prompt
    await station.alice.text("CI, Docs", reply_to=prompt["event_id"])
    status, out = await asyncio.wait_for(call, 30)
    assert status == 200 and out == answered(data, {Q2: "CI, Docs"})
