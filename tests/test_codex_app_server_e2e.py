"""The real Codex 0.171.0 app-server behind ``permission-bot codex-app-server``, offline, in the real room.

An IDE stand-in (:mod:`tests.support.codex_app`) drives Codex's own JSON-RPC through the proxy; Codex's model is
answered on loopback (:mod:`tests.support.model_api`). The model asks to run a command outside the
read-only sandbox (an approval) or, in plan mode, asks questions (``request_user_input``); alice answers in the
room; Codex gets the answer in its own words and the model what the person chose. A tap between the proxy and
Codex checks that everything else passes byte for byte.
Skipped only when ``tests/agents-npm/node_modules`` is absent and ``PB_REAL_AGENTS`` is not ``required``.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.codex_app import BIN, CodexApp
from tests.support.model_api import ModelApi
from tests.support.scripted_model import scripted
from tests.test_acp_e2e import prompt_for, record

REQUIRED = os.environ.get("PB_REAL_AGENTS") == "required"
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not (BIN / "codex").exists() and not REQUIRED, reason="tests/agents-npm not installed"),
]
LIFTED = {"item/commandExecution/requestApproval", "item/fileChange/requestApproval", "item/tool/requestUserInput"}
ESCALATED = {"tool": "exec_command", "args": {"cmd": "echo hi > a.txt", "sandbox_permissions": "require_escalated",
                                              "justification": "Create a.txt?"}}
QUESTIONS = [
    {"id": "database", "header": "Database", "question": "Which database should we use?",
     "options": [{"label": "Postgres (Recommended)", "description": "Relational, server based"},
                 {"label": "SQLite", "description": "Single file, no server"}]},
    {"id": "name", "header": "Name", "question": "What should the service be called?",
     "options": [{"label": "api", "description": "Short"}, {"label": "backend", "description": "Longer"}]},
    {"id": "lang", "header": "Language", "question": "Which language?",
     "options": [{"label": "Go", "description": "Compiled"}, {"label": "Python", "description": "Scripted"}]},
]


@pytest.fixture
async def model() -> AsyncIterator[ModelApi]:
    if not (BIN / "codex").exists():  # PB_REAL_AGENTS=required (scripts/test, CI): a failure, never a skip
        pytest.fail(f"{BIN.parent} is missing: run `npm ci --ignore-scripts` in tests/agents-npm")
    if shutil.which("bwrap") is None:
        pytest.fail("Codex's Linux sandbox needs bwrap: apt-get install bubblewrap")
    api = await ModelApi().start()
    yield api
    await api.close()


@pytest.fixture
async def codex(station: Any, model: ModelApi, tmp_path: Path) -> AsyncIterator[CodexApp]:
    app = await CodexApp.start(station.exe, station.api_url, station.token, model, tmp_path)
    yield app
    await app.close()


def is_prompt(station: Any, thread: str, ev: dict[str, Any]) -> bool:
    c = ev.get("content") or {}
    return (ev.get("type") == "m.room.message" and ev.get("sender") == station.bot_id
            and c.get("suite_event_type") == "dev.agentpod.permission.v2"
            and (c.get("m.relates_to") or {}).get("rel_type") != "m.replace" and c.get("session_id") == thread)


async def asked_to_run(
    station: Any, codex: CodexApp, tmp_path: Path
) -> tuple[Path, str, str, dict[str, Any], dict[str, Any]]:
    """A thread whose model asks to run a command outside the sandbox: the work dir, the thread, the turn, the
    prompt in the room and its pending record."""
    work = tmp_path / "work"
    work.mkdir()
    thread = await codex.begin(work)
    turn = await codex.turn(thread, scripted([ESCALATED], "run"))
    p = await prompt_for(station, thread, timeout=90)
    assert p, f"no prompt for Codex's approval; stderr:\n{codex.stderr()}"
    rec = await record(station, p["content"]["request_id"])
    assert rec["state"] == "pending"
    return work, thread, turn, p, rec


async def test_a_command_approval_answered_1_runs_it_and_the_rest_passes_byte_for_byte(
    station: Any, model: ModelApi, codex: CodexApp, tmp_path: Path
) -> None:
    work, _thread, _turn, p, rec = await asked_to_run(station, codex, tmp_path)
    params = rec["params"]
    assert params["toolCall"]["kind"] == "execute" and params["toolCall"]["title"] == "/bin/bash -lc 'echo hi > a.txt'"
    assert [o["optionId"] for o in params["options"]] == [
        "accept", "acceptWithExecpolicyAmendment", "decline", "cancel"]
    always = params["options"][1]["name"]
    assert "every later session" in always and "/bin/bash -lc echo hi > a.txt" in always
    assert p["content"]["options"][0]["id"] == "accept"  # 1 = allow once
    assert not (work / "a.txt").exists()
    await station.alice.text("1", reply_to=p["event_id"])
    await codex.turn_done()
    assert (work / "a.txt").read_text() == "hi\n", codex.stderr()
    got = await record(station, rec["id"])
    assert got["state"] == "resolved" and got["outcome"]["option_id"] == "accept"
    assert not LIFTED & set(codex.methods()), "a lifted request reached the client"
    await codex.close()
    # the relay: every line either side sent reached the other byte for byte, but the approval and its answer
    server_out = (codex.tap / "server_out").read_bytes().splitlines(keepends=True)
    server_in = (codex.tap / "server_in").read_bytes().splitlines(keepends=True)
    ours = [json.loads(line) for line in server_out if json.loads(line).get("method") in LIFTED]
    assert [m["method"] for m in ours] == ["item/commandExecution/requestApproval"]
    rid = ours[0]["id"]
    resolved = [line for line in server_out if json.loads(line).get("method") == "serverRequest/resolved"
                and json.loads(line)["params"]["requestId"] == rid]
    expected_out = [line for line in server_out if json.loads(line).get("method") not in LIFTED
                    and line not in resolved]
    assert codex.got == expected_out
    answers = [json.loads(line) for line in server_in if line not in codex.sent]
    assert answers == [{"jsonrpc": "2.0", "id": rid, "result": {"decision": "accept"}}]
    assert [line for line in server_in if line in codex.sent] == codex.sent


async def test_a_command_approval_denied_gives_the_model_the_rejection(
    station: Any, model: ModelApi, codex: CodexApp, tmp_path: Path
) -> None:
    work, _thread, _turn, p, rec = await asked_to_run(station, codex, tmp_path)
    shown = [o["id"] for o in p["content"]["options"]]
    assert shown == ["accept", "acceptWithExecpolicyAmendment", "decline", "cancel"]
    await station.alice.text(str(shown.index("decline") + 1), reply_to=p["event_id"])  # no: the turn goes on
    await codex.turn_done()
    got = await record(station, rec["id"])
    assert got["state"] == "resolved" and got["outcome"]["option_id"] == "decline"
    assert not (work / "a.txt").exists()
    assert model.tool_results and "rejected by user" in model.tool_results[-1], model.requests
    assert any("rejected by user" in t for t in codex.agent_text())


async def test_questions_answered_by_number_label_and_free_text_reach_the_model_as_codex_json(
    station: Any, model: ModelApi, codex: CodexApp, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    thread = await codex.begin(work)
    ask = {"tool": "request_user_input", "args": {"questions": QUESTIONS}}
    await codex.turn(thread, scripted([ask], "ask me"), plan=True)
    prompts: list[dict[str, Any]] = []
    for n in range(1, 4):
        ev = await station.alice.wait(
            lambda e, n=n: is_prompt(station, thread, e) and len(station.alice.find(
                lambda x: is_prompt(station, thread, x))) >= n, 90)
        assert ev, f"question {n} not posted; stderr:\n{codex.stderr()}"
        prompts = station.alice.find(lambda x: is_prompt(station, thread, x))
    assert len(prompts) == 3
    recs = [await record(station, p["content"]["request_id"]) for p in prompts]
    assert [r["params"]["toolCall"]["rawInput"]["question"] for r in recs] == [q["question"] for q in QUESTIONS]
    assert all(r["params"]["toolCall"]["rawInput"]["freeText"] for r in recs)
    await station.alice.text("2", reply_to=prompts[0]["event_id"])
    await station.alice.text("backend", reply_to=prompts[1]["event_id"])
    await station.alice.text("Rust, please", reply_to=prompts[2]["event_id"])
    await codex.turn_done()
    want = {"answers": {"database": {"answers": ["SQLite"]}, "name": {"answers": ["backend"]},
                        "lang": {"answers": ["Rust, please"]}}}
    assert len(model.tool_results) == 1, (model.requests, codex.stderr())
    assert json.loads(model.tool_results[0]) == want  # Codex's JSON of the reply, verbatim (its key order is its own)
    assert not LIFTED & set(codex.methods())


async def test_an_interrupted_turn_withdraws_the_prompt_and_codex_gets_cancel(
    station: Any, model: ModelApi, codex: CodexApp, tmp_path: Path
) -> None:
    work, thread, turn, p, rec = await asked_to_run(station, codex, tmp_path)
    await codex.request("turn/interrupt", {"threadId": thread, "turnId": turn})
    done = await codex.turn_done()
    assert done["params"]["turn"]["status"] == "interrupted"
    got = await record(station, rec["id"])
    assert got["state"] == "cancelled" and not (work / "a.txt").exists()
    await codex.close()
    answers = [json.loads(line) for line in (codex.tap / "server_in").read_bytes().splitlines(keepends=True)
               if line not in codex.sent]
    assert [a["result"] for a in answers] == [{"decision": "cancel"}]  # answered before the interrupt went on
    edited = await station.alice.wait(
        lambda e: (e.get("content") or {}).get("m.relates_to", {}).get("event_id") == p["event_id"]
        and (e.get("content") or {}).get("m.relates_to", {}).get("rel_type") == "m.replace", 30)
    assert edited, "the prompt was not edited to say it was withdrawn"


async def test_a_file_change_approval_shows_the_file_and_answered_1_writes_it(
    station: Any, model: ModelApi, codex: CodexApp, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    thread = await codex.begin(work)
    patch = "*** Begin Patch\n*** Add File: notes.txt\n+hello from codex\n*** End Patch\n"
    await codex.turn(thread, scripted([{"custom": "apply_patch", "input": patch}], "write"))
    p = await prompt_for(station, thread, timeout=90)
    assert p, f"no prompt for Codex's file change; methods {codex.methods()}; stderr:\n{codex.stderr()}"
    rec = await record(station, p["content"]["request_id"])
    tc = rec["params"]["toolCall"]
    assert tc["kind"] == "edit" and tc["title"] == f"Edit {work / 'notes.txt'}", tc
    assert p["content"]["options"][0]["id"] == "accept"
    await station.alice.text("1", reply_to=p["event_id"])
    await codex.turn_done()
    assert (work / "notes.txt").read_text() == "hello from codex\n", (model.tool_results, codex.stderr())
    assert not LIFTED & set(codex.methods())
