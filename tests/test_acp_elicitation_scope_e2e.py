"""ACP's request-scoped elicitation (``requestId``, no ``sessionId``: during ``session/new`` or sign-in, say),
through `permission-bot acp` with the tests' own byte-level agent: asked in the room like any other form (the
real daemon and Synapse). One tied to neither is declined: tests/test_acp_elicitation_e2e.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.test_acp_elicitation_e2e import FORM, V2, answer, raw, wait_prompts

pytestmark = pytest.mark.e2e


async def test_forms_tied_to_a_request_not_a_session(station: Any, tmp_path: Path, sid: str) -> None:
    """ACP's request-scoped elicitation (``requestId``, no ``sessionId``: during session/new, say) goes to the room.
    Each form gets a daemon session of its own: a request id is the client's JSON-RPC id, which another run uses
    too (another room's would be refused as that room's session) and may be no safe id."""
    a, b = await raw(station, tmp_path), await raw(station, tmp_path)
    try:
        def form(rpc_id: Any, request_id: Any, key: str) -> str:
            schema = {"type": "object", "properties": {
                key: {"type": "string", "description": f"{key} for {sid}?"}, "fast": FORM["properties"]["fast"]}}
            params = {"requestId": request_id, "mode": "form", "message": "Set up", "requestedSchema": schema}
            return json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": "elicitation/create", "params": params})

        await a.agent_sends(form(1, 0, "name"))
        await b.agent_sends(form(1, 0, "owner"))
        await a.agent_sends(form(2, "auth step/1 ünsafe", "token_label"))
        await station.alice.follow()
        found: dict[str, list[dict[str, Any]]] = {}
        for key in ("name", "owner", "token_label"):
            first = await station.alice.wait(lambda e, k=key: f"{k} for {sid}?" in (e.get("content") or {}).get(
                "body", "") and (e.get("content") or {}).get("suite_event_type") == V2, 30)
            assert first, f"no prompt for {key}"
            session = first["content"]["session_id"]
            assert session.startswith("request:")
            found[key] = sorted(await wait_prompts(station, session, 2), key=lambda p: p["content"]["request_seq"])
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
