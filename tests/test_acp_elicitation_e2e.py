"""`permission-bot acp` answers `elicitation/create` from the room: the real daemon and Synapse, the tests' own
byte-level agent (tests/agents/raw_agent.py) sending what an agent sends, the test as the ACP client."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.agents.raw import RawRun
from tests.test_acp_e2e import record

pytestmark = pytest.mark.e2e

V2 = "dev.agentpod.permission.v2"


async def raw(station: Any, tmp_path: Path, caps: dict[str, Any] | None = None) -> RawRun:
    """The proxy with the raw agent; the test (the client) initializes with ``caps``."""
    r = await RawRun.start(["--url", station.api_url, "--token", station.token], tmp_path, station.exe)
    init = {"protocolVersion": 1, "clientCapabilities": caps or {}}
    await r.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
    await r.wait(lambda: any(m.get("method") == "initialize" for m in r.agent_json()), 60, "initialize")
    return r


def elicit_line(rpc_id: Any, sid: str, schema: dict[str, Any], message: str = "Please answer") -> str:
    params = {"sessionId": sid, "toolCallId": "toolu_1", "mode": "form", "message": message,
              "requestedSchema": schema}
    return json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": "elicitation/create", "params": params})


def prompts(station: Any, sid: str) -> list[dict[str, Any]]:
    """The question prompts of session ``sid``, in the room's order (edits left out)."""
    def pred(e: dict[str, Any]) -> bool:
        c = e.get("content") or {}
        return (e.get("type") == "m.room.message" and c.get("suite_event_type") == V2
                and (c.get("m.relates_to") or {}).get("rel_type") != "m.replace" and c.get("session_id") == sid)

    return station.alice.find(pred)  # type: ignore[no-any-return]


async def wait_prompts(station: Any, sid: str, n: int, timeout: float = 30) -> list[dict[str, Any]]:
    deadline = asyncio.get_running_loop().time() + timeout
    await station.alice.follow()
    while len(got := prompts(station, sid)) < n:
        assert asyncio.get_running_loop().time() < deadline, f"{len(got)} prompts for {sid}, not {n}"
        await asyncio.sleep(0.1)
    return got


async def answer(station: Any, prompt: dict[str, Any], text: str) -> None:
    await station.alice.text(text, reply_to=prompt["event_id"])


FORM = {
    "type": "object",
    "properties": {
        "question_0": {"type": "string", "title": "Database", "description": "Which database should we use?",
                       "oneOf": [{"const": "Postgres", "title": "Postgres", "description": "Relational"},
                                 {"const": "SQLite", "title": "SQLite", "description": "Single file"}]},
        "question_0_custom": {"type": "string", "title": "Other", "description": "Your own answer"},
        "question_1": {"type": "array", "title": "Extras", "description": "Which extras do you want?",
                       "items": {"anyOf": [{"const": "Docker", "title": "Docker"}, {"const": "CI", "title": "CI"},
                                           {"const": "Docs", "title": "Docs"}]}},
        "workers": {"type": "integer", "title": "Workers", "description": "How many workers?", "minimum": 1},
        "ratio": {"type": "number", "description": "Which ratio?"},
        "fast": {"type": "boolean", "description": "Fast mode?"},
        "name": {"type": "string", "description": "The project's name?"},
    },
}


async def test_form_every_kind_answered_in_the_room(station: Any, tmp_path: Path, sid: str) -> None:
    r = await raw(station, tmp_path)
    try:
        init = next(m for m in r.agent_json() if m.get("method") == "initialize")
        assert init["params"]["clientCapabilities"]["elicitation"] == {"form": {}, "url": {}}
        await r.agent_sends(elicit_line(7, sid, FORM))
        seq = lambda p: p["content"]["request_seq"]  # noqa: E731 - a form's prompts may be posted together (any order)
        ps = sorted(await wait_prompts(station, sid, 6), key=seq)
        bodies = [p["content"]["body"] for p in ps]
        assert "Which database should we use?" in bodies[0] and "question 1 of 6" in bodies[0]
        assert "Which extras" in bodies[1] and "How many workers?" in bodies[2] and "Fast mode?" in bodies[4]
        assert [o["id"] for o in ps[0]["content"]["options"]] == ["Postgres", "SQLite", "decline"]
        assert [o["meaning"] for o in ps[0]["content"]["options"]] == ["choose", "choose", "reject"]
        assert ps[0]["content"]["tool_kind"] == "question"
        await answer(station, ps[0], "MySQL, please")  # its own words: the "Other" field
        await answer(station, ps[1], "1, 3")
        await answer(station, ps[2], "many")  # not a number: asked again
        await answer(station, ps[3], "2.5")
        await answer(station, ps[4], "Yes")
        await answer(station, ps[5], "permission-bot")
        again = max(await wait_prompts(station, sid, 7), key=seq)
        assert "not a whole number" in again["content"]["body"] or "not a number" in again["content"]["body"]
        await answer(station, again, "1")  # a number question: 1 is the number, not a choice
        reply = await r.agent_reply(7)
        assert reply["result"] == {"action": "accept", "content": {
            "question_0_custom": "MySQL, please", "question_1": ["Docker", "Docs"], "workers": 1, "ratio": 2.5,
            "fast": True, "name": "permission-bot"}}
        assert not [ln for ln in r.client_lines if b"elicitation/create" in ln]  # the client never saw it
        recs = [await record(station, p["content"]["request_id"]) for p in ps]
        assert {rec["kind"] for rec in recs} == {"question"}
        assert recs[1]["outcome"]["answers"] == {"Which extras do you want?": "Docker, Docs"}
        assert recs[2]["outcome"]["answers"] == {"How many workers?": "many"}
    finally:
        await r.close()


async def test_single_choice_and_decline(station: Any, tmp_path: Path, sid: str) -> None:
    r = await raw(station, tmp_path)
    try:
        schema = {"type": "object", "properties": {k: FORM["properties"][k] for k in ("question_0", "fast")}}
        await r.agent_sends(elicit_line("a", sid, schema))
        ps = await wait_prompts(station, sid, 2)
        await answer(station, ps[0], "2")
        await answer(station, ps[1], "3")  # Yes, No, decline
        reply = await r.agent_reply("a")
        assert reply["result"] == {"action": "decline"}
        await r.agent_sends(elicit_line("b", sid, schema))
        ps = (await wait_prompts(station, sid, 4))[2:]
        await answer(station, ps[0], "Postgres")
        await answer(station, ps[1], "no")
        assert (await r.agent_reply("b"))["result"] == {
            "action": "accept", "content": {"question_0": "Postgres", "fast": False}}
    finally:
        await r.close()


async def test_declined_question_withdraws_its_siblings(station: Any, tmp_path: Path, sid: str) -> None:
    r = await raw(station, tmp_path)
    try:
        schema = {"type": "object", "properties": {k: FORM["properties"][k] for k in ("question_0", "name")}}
        await r.agent_sends(elicit_line(1, sid, schema))
        ps = await wait_prompts(station, sid, 2)
        await answer(station, ps[0], "decline")
        assert (await r.agent_reply(1))["result"] == {"action": "decline"}
        rec = await record(station, ps[1]["content"]["request_id"])
        assert rec["state"] == "cancelled"
    finally:
        await r.close()


async def test_url_mode(station: Any, tmp_path: Path, sid: str) -> None:
    r = await raw(station, tmp_path)
    try:
        params = {"sessionId": sid, "mode": "url", "message": "Sign in to continue", "elicitationId": "el1",
                  "url": "https://auth.example.com/login?state=abc"}
        await r.agent_sends(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "elicitation/create", "params": params}))
        (p,) = await wait_prompts(station, sid, 1)
        body = p["content"]["body"]
        assert body.startswith("Question: Sign in to continue\nHost: auth.example.com\n"
                               "Link: https://auth.example.com/login?state=abc\n"), body
        await answer(station, p, "1")
        assert (await r.agent_reply(3))["result"] == {"action": "accept"}
    finally:
        await r.close()


async def test_session_cancel_and_cancel_request(station: Any, tmp_path: Path, sid: str) -> None:
    r = await raw(station, tmp_path)
    try:
        schema = {"type": "object", "properties": {"name": FORM["properties"]["name"]}}
        await r.agent_sends(elicit_line(1, sid, schema))
        (p,) = await wait_prompts(station, sid, 1)
        await r.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
        assert (await r.agent_reply(1))["result"] == {"action": "cancel"}
        assert (await record(station, p["content"]["request_id"]))["state"] == "cancelled"
        await r.agent_sends(elicit_line(2, sid, schema))
        p2 = (await wait_prompts(station, sid, 2))[1]
        await r.agent_sends(json.dumps({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 2}}))
        assert (await r.agent_reply(2))["result"] == {"action": "cancel"}
        assert (await record(station, p2["content"]["request_id"]))["state"] == "cancelled"
        assert not [ln for ln in r.client_lines if b"cancel_request" in ln]  # ours: not relayed
    finally:
        await r.close()


async def test_client_that_advertised_elicitation_answers_first(station: Any, tmp_path: Path, sid: str) -> None:
    r = await raw(station, tmp_path, {"elicitation": {"form": {}}})
    try:
        schema = {"type": "object", "properties": {"name": FORM["properties"]["name"]}}
        await r.agent_sends(elicit_line(5, sid, schema))
        (p,) = await wait_prompts(station, sid, 1)
        line = await r.wait(lambda: next((json.loads(x) for x in r.client_lines if b"elicitation/create" in x), None),
                            10, "the client's copy")
        assert line["params"] == json.loads(elicit_line(5, sid, schema))["params"] and line["id"] != 5
        await r.send({"jsonrpc": "2.0", "id": line["id"], "result": {"action": "accept", "content": {"name": "ed"}}})
        assert (await r.agent_reply(5))["result"] == {"action": "accept", "content": {"name": "ed"}}
        rec = await record(station, p["content"]["request_id"])
        assert rec["state"] == "cancelled"
    finally:
        await r.close()


async def test_room_answers_before_the_client(station: Any, tmp_path: Path, sid: str) -> None:
    r = await raw(station, tmp_path, {"elicitation": {"form": {}, "url": {}}})
    try:
        schema = {"type": "object", "properties": {"name": FORM["properties"]["name"]}}
        await r.agent_sends(elicit_line(6, sid, schema))
        (p,) = await wait_prompts(station, sid, 1)
        line = await r.wait(lambda: next((json.loads(x) for x in r.client_lines if b"elicitation/create" in x), None),
                            10, "the client's copy")
        await answer(station, p, "room-name")
        assert (await r.agent_reply(6))["result"] == {"action": "accept", "content": {"name": "room-name"}}
        withdraw = await r.wait(
            lambda: next((json.loads(x) for x in r.client_lines if b"$/cancel_request" in x), None), 10, "withdrawal")
        assert withdraw["params"] == {"requestId": line["id"]}
        # the client's late reply goes nowhere
        await r.send({"jsonrpc": "2.0", "id": line["id"], "error": {"code": -32800, "message": "Request cancelled"}})
        await r.send({"jsonrpc": "2.0", "method": "_test/emit", "params": {"line": "{}"}})
        await r.wait(lambda: len(r.agent_json()) >= 1 and r.agent_json()[-1].get("method") == "_test/emit", 10)
        assert not [m for m in r.agent_json() if m.get("id") == line["id"]]
    finally:
        await r.close()


PLAN_A101 = {
    "toolCall": {
        "content": [{"content": {"text": "# Plan\n\n1. Create the file M1\n", "type": "text"}, "type": "content"}],
        "kind": "switch_mode", "name": "ExitPlanMode", "status": "pending", "title": "Approve Plan",
        "toolCallId": "toolu_mock0004",
        "rawInput": {"plan": "# Plan\n\n1. Create the file M1\n", "planFilePath": "/home/u/.claude/plans/p.md"},
    },
    "options": [
        {"kind": "allow_once", "name": "Yes, manually approve edits", "optionId": "exit-plan-default"},
        {"kind": "allow_always", "name": "Yes, clear context (0% used) and use auto mode",
         "optionId": "exit-plan-clear-auto"},
        {"kind": "allow_always", "name": "Yes, and use auto mode", "optionId": "exit-plan-auto"},
        {"kind": "reject_once", "name": "No, keep planning", "optionId": "reject"},
    ],
}
PLAN_A16 = {
    "toolCall": {"rawInput": {"plan": "# Plan\n\n1. Create the file M1\n2. Run the tests\n"},
                 "title": "Ready to code?", "toolCallId": "toolu_mock0001"},
    "options": [
        {"kind": "allow_always", "name": "Yes, and auto-accept edits", "optionId": "acceptEdits"},
        {"kind": "allow_once", "name": "Yes, and manually approve edits", "optionId": "default"},
        {"kind": "reject_once", "name": "No, keep planning", "optionId": "plan"},
    ],
}


@pytest.mark.parametrize(("shape", "reply", "chosen"), [
    (PLAN_A101, "1", "exit-plan-default"), (PLAN_A101, "No, keep planning", "reject"),
    (PLAN_A16, "2", "acceptEdits"), (PLAN_A16, "3", "plan"),
])
async def test_plan_through_acp(
    station: Any, tmp_path: Path, sid: str, shape: dict[str, Any], reply: str, chosen: str
) -> None:
    r = await raw(station, tmp_path)
    try:
        # as the adapters do: the tool call announced first, its _meta naming the harness's plan tool
        call = {"sessionUpdate": "tool_call", "toolCallId": shape["toolCall"]["toolCallId"], "title": "Plan",
                "kind": "switch_mode", "status": "pending", "rawInput": {},
                "_meta": {"claudeCode": {"toolName": "ExitPlanMode"}}}
        note = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": call}}
        await r.agent_sends(json.dumps(note))
        msg = {"jsonrpc": "2.0", "id": 9, "method": "session/request_permission", "params": {"sessionId": sid, **shape}}
        await r.agent_sends(json.dumps(msg))
        (p,) = await wait_prompts(station, sid, 1)
        c = p["content"]
        assert "Plan to approve" in c["body"] and "Create the file M1" in c["body"]
        assert "<h1>Plan</h1>" in c["formatted_body"] or "Plan</h" in c["formatted_body"]
        assert [o["id"] for o in c["options"]][-1] in ("reject", "plan")  # numbered by meaning: allow first
        await answer(station, p, reply)
        got = await r.agent_reply(9)
        assert got["result"]["outcome"] == {"outcome": "selected", "optionId": chosen}
        assert (await record(station, c["request_id"]))["kind"] == "plan"
    finally:
        await r.close()


async def test_a_client_error_is_no_answer(station: Any, tmp_path: Path, sid: str) -> None:
    r = await raw(station, tmp_path, {"elicitation": {"form": {}}})
    try:
        schema = {"type": "object", "properties": {"name": FORM["properties"]["name"]}}
        await r.agent_sends(elicit_line(4, sid, schema))
        (p,) = await wait_prompts(station, sid, 1)
        line = await r.wait(lambda: next((json.loads(x) for x in r.client_lines if b"elicitation/create" in x), None),
                            10, "the client's copy")
        await r.send({"jsonrpc": "2.0", "id": line["id"], "error": {"code": -32601, "message": "Method not found"}})
        assert await r.logged("elicitation_client_unable")
        await answer(station, p, "from the room")
        assert (await r.agent_reply(4))["result"] == {"action": "accept", "content": {"name": "from the room"}}
    finally:
        await r.close()


async def test_what_the_room_cannot_ask_is_declined_and_never_reaches_the_client(
    station: Any, tmp_path: Path, sid: str
) -> None:
    r = await raw(station, tmp_path)
    try:
        bad = [
            {"sessionId": sid, "message": "no mode", "requestedSchema": {}},
            {"sessionId": sid, "mode": "url", "message": "m", "elicitationId": "e", "url": "javascript:alert(1)"},
            {"sessionId": sid, "mode": "form", "message": "m",
             "requestedSchema": {"properties": {"f": {"type": "object"}}, "required": ["f"]}},
            {"mode": "form", "message": "tied to nothing",
             "requestedSchema": {"properties": {"f": {"type": "string"}}}},
        ]
        for i, params in enumerate(bad):
            method = "elicitation\\u002fcreate" if i == 0 else "elicitation/create"  # escapes change nothing
            line = json.dumps({"jsonrpc": "2.0", "id": i, "method": "@M@", "params": params})
            await r.agent_sends(line.replace('"@M@"', f'"{method}"'))
            assert (await r.agent_reply(i))["result"] == {"action": "decline"}
        assert await r.logged("neither sessionId nor requestId")
        assert not [ln for ln in r.client_lines if b"elicitation" in ln]
        assert not prompts(station, sid)
    finally:
        await r.close()


async def test_a_question_timing_out_cancels_the_form(station: Any, tmp_path: Path, sid: str) -> None:
    station.prompts["timeout"] = "2s"
    station.write_config()
    await station.restart_daemon()
    r = await raw(station, tmp_path)
    try:
        schema = {"type": "object", "properties": {k: FORM["properties"][k] for k in ("question_0", "name")}}
        await r.agent_sends(elicit_line(1, sid, schema))
        ps = await wait_prompts(station, sid, 2)
        assert (await r.agent_reply(1, timeout=20))["result"] == {"action": "cancel"}
        states = {(await record(station, p["content"]["request_id"]))["state"] for p in ps}
        assert states <= {"expired", "cancelled"} and "expired" in states
    finally:
        await r.close()
        station.prompts["timeout"] = "10m"
        station.write_config()
        await station.restart_daemon()
