"""ACP elicitation through `permission-bot acp` (issue 33): the test is the client, ``raw_agent.py`` the agent
(it sends the elicitation the Claude ACP adapter 0.101 sent, and forms of every kind), the real daemon and
Synapse behind. The room answers; the agent gets ``accept`` with the content, ``decline`` or ``cancel``; the
client never receives the ``elicitation/create``; the agent is told the client can elicit whatever it said."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.human import content
from tests.test_acp_attacks_e2e import cancel_line, raw

pytestmark = pytest.mark.e2e
FIX = Path(__file__).parent / "fixtures" / "questions"


def elicitation(rpc_id: int, sid: str, params: dict[str, Any] | None = None) -> str:
    p = params or json.loads((FIX / "acp101-elicitation-create-AskUserQuestion.json").read_text())
    msg = {"jsonrpc": "2.0", "id": rpc_id, "method": "elicitation/create", "params": {**p, "sessionId": sid}}
    return json.dumps(msg)


def form(**props: dict[str, Any]) -> dict[str, Any]:
    return {"mode": "form", "message": "Tell me", "requestedSchema": {"type": "object", "properties": props}}


async def test_initialize_advertises_elicitation_and_the_adapters_form_is_answered(
    station: Any, tmp_path: Path, sid: str
) -> None:
    r = await raw(station, tmp_path)
    try:
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True}}}}
        await r.send(init)
        got = await r.wait(lambda: [m for m in r.agent_json() if m.get("method") == "initialize"], what="initialize")
        caps = got[0]["params"]["clientCapabilities"]
        assert caps == {"fs": {"readTextFile": True}, "elicitation": {"form": {}, "url": {}}}
        await r.agent_sends(elicitation(5, sid))
        first = await station.prompt_for(sid, seq=1)
        second = await station.prompt_for(sid, seq=2)
        assert first and second
        assert "1. Postgres: Relational, server based" in content(first)["body"]
        assert "several choices allowed" in content(second)["body"]
        await station.alice.text("MySQL, please", reply_to=first["event_id"])  # the "Other" field
        await station.alice.text("1, 2", reply_to=second["event_id"])
        reply = await r.agent_reply(5)
        assert reply["result"] == {"action": "accept",
                                   "content": {"question_0_custom": "MySQL, please", "question_1": ["Docker", "CI"]}}
        assert not any(b"elicitation/create" in x for x in r.client_lines), "the client got the elicitation"
    finally:
        await r.close()


async def test_every_kind_of_field(station: Any, tmp_path: Path, sid: str) -> None:
    r = await raw(station, tmp_path)
    try:
        params = form(
            name={"type": "string", "title": "Name", "description": "What is the project called?"},
            size={"type": "integer", "title": "Size", "description": "How many workers?"},
            ok={"type": "boolean", "title": "Go", "description": "Deploy now?"},
            env={"type": "string", "title": "Env", "enum": ["staging", "prod"]},
        )
        await r.agent_sends(elicitation(6, sid, params))
        prompts = [await station.prompt_for(sid, seq=n) for n in (1, 2, 3, 4)]
        assert all(prompts)
        await station.alice.text("Atlas", reply_to=prompts[0]["event_id"])  # type: ignore[index]
        mark = station.alice.mark()
        await station.alice.text("many", reply_to=prompts[1]["event_id"])  # type: ignore[index]
        assert await station.notice_after(mark, contains="takes an integer")
        await station.alice.text("12", reply_to=prompts[1]["event_id"])  # type: ignore[index]
        await station.alice.text("yes", reply_to=prompts[2]["event_id"])  # type: ignore[index]
        await station.alice.text("2", reply_to=prompts[3]["event_id"])  # type: ignore[index]
        reply = await r.agent_reply(6)
        assert reply["result"] == {"action": "accept",
                                   "content": {"name": "Atlas", "size": 12, "ok": True, "env": "prod"}}
    finally:
        await r.close()


async def test_decline_cancel_and_url_mode(station: Any, tmp_path: Path, sid: str) -> None:
    r = await raw(station, tmp_path)
    try:
        await r.agent_sends(elicitation(7, sid))
        first = await station.prompt_for(sid, seq=1)
        assert first and await station.prompt_for(sid, seq=2)
        await station.alice.text("3", reply_to=first["event_id"])  # decline
        assert (await r.agent_reply(7))["result"] == {"action": "decline"}
        _, rec = await station.ahttp("GET", f"/permissions/{sid}:2")
        assert rec["state"] == "cancelled"  # the other question is withdrawn
        await r.agent_sends(elicitation(8, sid))
        assert await station.prompt_for(sid, seq=4)
        await r.send(cancel_line(sid))  # the turn is cancelled
        assert (await r.agent_reply(8))["result"] == {"action": "cancel"}
        _, rec = await station.ahttp("GET", f"/permissions/{sid}:3")
        assert rec["state"] == "cancelled"
        url = {"mode": "url", "message": "Sign in", "url": "https://auth.example.com/device?c=1",
               "elicitationId": "e1"}
        await r.agent_sends(elicitation(9, sid, url))
        p = await station.prompt_for(sid, seq=5)
        assert p and "https://auth.example.com/device?c=1 (host: auth.example.com)" in content(p)["body"]
        await station.alice.text("1", reply_to=p["event_id"])
        assert (await r.agent_reply(9))["result"] == {"action": "accept"}
    finally:
        await r.close()


async def test_a_plan_through_acp_is_shown_as_a_plan(station: Any, tmp_path: Path, sid: str) -> None:
    r = await raw(station, tmp_path)
    try:
        params = json.loads((FIX / "acp101-request_permission-ExitPlanMode.json").read_text())
        params["sessionId"] = sid
        await r.agent_sends(json.dumps({"jsonrpc": "2.0", "id": 11, "method": "session/request_permission",
                                        "params": params}))
        p = await station.prompt_for(sid)
        assert p
        c = content(p)
        assert c["body"].startswith("Plan to approve: Approve Plan") and "│ 1. Create the file M1" in c["body"]
        assert "1. Yes, manually approve edits\n2. Yes, clear context" in c["body"]  # by meaning
        assert "4. No, keep planning" in c["body"]
        await station.alice.text("4", reply_to=p["event_id"])
        reply = await r.agent_reply(11)
        assert reply["result"]["outcome"] == {"outcome": "selected", "optionId": "reject"}
        _, rec = await station.ahttp("GET", f"/permissions/{sid}:1")
        assert rec["kind"] == "plan"
    finally:
        await r.close()


async def test_a_client_that_elicits_gets_it_too_and_the_first_answer_wins(
    station: Any, tmp_path: Path, sid: str
) -> None:
    r = await raw(station, tmp_path)
    try:
        caps = {"elicitation": {"form": {}, "url": {}}}
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": 1, "clientCapabilities": caps}}
        await r.send(init)
        await r.wait(lambda: [m for m in r.agent_json() if m.get("method") == "initialize"], what="initialize")
        # the editor answers first: the agent gets its answer, the room's questions are withdrawn
        await r.agent_sends(elicitation(21, sid))
        got = await r.wait(lambda: [json.loads(x) for x in r.client_lines if b"elicitation/create" in x],
                           what="the elicitation at the client")
        fid = got[0]["id"]
        assert fid != 21 and got[0]["params"]["sessionId"] == sid
        first = await station.prompt_for(sid, seq=1)
        assert first and await station.prompt_for(sid, seq=2)
        editor = {"action": "accept", "content": {"question_0": "SQLite", "question_1": ["Docs"]}}
        await r.send({"jsonrpc": "2.0", "id": fid, "result": editor})
        assert (await r.agent_reply(21))["result"] == editor
        _, rec = await station.ahttp("GET", f"/permissions/{sid}:1")
        assert rec["state"] == "cancelled" and rec["outcome"]["feedback"] == "withdrawn: answered in the editor"
        assert await station.edit_of(first["event_id"])
        # the room answers first: the client is told to drop it
        await r.agent_sends(elicitation(22, sid))
        third = await station.prompt_for(sid, seq=3)
        fourth = await station.prompt_for(sid, seq=4)
        assert third and fourth
        await station.alice.text("2", reply_to=third["event_id"])
        await station.alice.text("3", reply_to=fourth["event_id"])
        reply = await r.agent_reply(22)
        assert reply["result"] == {"action": "accept", "content": {"question_0": "SQLite", "question_1": ["Docs"]}}
        withdrawn = await r.wait(lambda: [json.loads(x) for x in r.client_lines if b"$/cancel_request" in x],
                                 what="the withdrawal at the client")
        assert withdrawn[-1]["params"]["requestId"].startswith("permission-bot:fwd:")
    finally:
        await r.close()
