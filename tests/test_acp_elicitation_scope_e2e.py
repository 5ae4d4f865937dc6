"""ACP's request-scoped elicitation (``requestId``, no ``sessionId``: during ``session/new`` or sign-in, say),
through `permission-bot acp` with the tests' own byte-level agent: asked in the room like any other form (the
real daemon and Synapse), cancelled when the client cancels that request. One tied to neither is declined:
tests/test_acp_elicitation_e2e.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.station import Station
from tests.test_acp_e2e import record
from tests.test_acp_elicitation_e2e import FORM, V2, answer, raw, wait_prompts

pytestmark = pytest.mark.e2e


def form(sid: str, rpc_id: Any, request_id: Any, key: str) -> str:
    """A request-scoped form: ``key`` (text, asked as "<key> for <sid>?") and "Fast mode?" (yes / no)."""
    schema = {"type": "object", "properties": {
        key: {"type": "string", "description": f"{key} for {sid}?"}, "fast": FORM["properties"]["fast"]}}
    params = {"requestId": request_id, "mode": "form", "message": "Set up", "requestedSchema": schema}
    return json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": "elicitation/create", "params": params})


async def prompts_of(station: Station, sid: str, key: str) -> list[dict[str, Any]]:
    """The two prompts of the form asking ``key``, in order (found by its text: the session is the proxy's)."""
    def is_first(e: dict[str, Any]) -> bool:
        c = e.get("content") or {}
        return f"{key} for {sid}?" in c.get("body", "") and c.get("suite_event_type") == V2

    first = await station.alice.wait(is_first, 30)
    assert first, f"no prompt for {key}"
    session = first["content"]["session_id"]
    assert session.startswith("request:")
    return sorted(await wait_prompts(station, session, 2), key=lambda p: p["content"]["request_seq"])


async def test_forms_tied_to_a_request_not_a_session(station: Station, tmp_path: Path, sid: str) -> None:
    """Each form gets a daemon session of its own: a request id is the client's JSON-RPC id, which another run
    uses too (another room's would be refused as that room's session) and may be no safe id."""
    a, b = await raw(station, tmp_path), await raw(station, tmp_path)
    try:
        await a.agent_sends(form(sid, 1, 0, "name"))
        await b.agent_sends(form(sid, 1, 0, "owner"))
        await a.agent_sends(form(sid, 2, "auth step/1 ünsafe", "token_label"))
        found = {key: await prompts_of(station, sid, key) for key in ("name", "owner", "token_label")}
        assert len({ps[0]["content"]["session_id"] for ps in found.values()}) == 3  # one session each
        await answer(station, found["name"][0], "alpha")
        await answer(station, found["name"][1], "Yes")
        await answer(station, found["owner"][0], "bob")
        await answer(station, found["owner"][1], "No")
        await answer(station, found["token_label"][0], "ci")
        await answer(station, found["token_label"][1], "decline")
        assert (await a.agent_reply(1))["result"] == {"action": "accept", "content": {"name": "alpha", "fast": True}}
        assert (await b.agent_reply(1))["result"] == {"action": "accept", "content": {"owner": "bob", "fast": False}}
        assert (await a.agent_reply(2))["result"] == {"action": "decline"}
    finally:
        await a.close()
        await b.close()


async def test_the_client_cancelling_the_request_cancels_its_form(station: Station, tmp_path: Path, sid: str) -> None:
    r = await raw(station, tmp_path)
    try:
        await r.agent_sends(form(sid, 3, 5, "label"))
        ps = await prompts_of(station, sid, "label")
        await r.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 4}})  # another request
        await r.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 5}})
        assert (await r.agent_reply(3))["result"] == {"action": "cancel"}
        assert {(await record(station, p["content"]["request_id"]))["state"] for p in ps} == {"cancelled"}
        got = r.agent_json()
        relayed = [i for i, m in enumerate(got) if m.get("method") == "$/cancel_request"]
        answered = next(i for i, m in enumerate(got) if m.get("id") == 3)
        assert len(relayed) == 2 and relayed[0] < answered < relayed[1]  # the agent hears its cancel after the answer
    finally:
        await r.close()


async def test_the_agent_answering_the_request_cancels_its_form(station: Station, tmp_path: Path, sid: str) -> None:
    """A form asks about a request; once the agent answers that request itself, the question is moot: the
    agent's form is answered ``cancel`` and its prompts withdrawn; the agent's answer reaches the client as it was."""
    r = await raw(station, tmp_path)
    try:
        await r.agent_sends(form(sid, 6, 8, "region"))
        ps = await prompts_of(station, sid, "region")
        await r.agent_sends(json.dumps({"jsonrpc": "2.0", "id": 7, "result": {}}))  # another request: no effect
        done = json.dumps({"jsonrpc": "2.0", "id": 8, "result": {"sessionId": "s-8"}})
        await r.agent_sends(done)
        assert (await r.agent_reply(6))["result"] == {"action": "cancel"}
        assert {(await record(station, p["content"]["request_id"]))["state"] for p in ps} == {"cancelled"}
        await r.wait(lambda: done.encode() + b"\n" in r.client_lines, 10, "the agent's answer relayed unchanged")
    finally:
        await r.close()
