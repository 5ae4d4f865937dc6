"""The proxy under a hostile agent, byte for byte (issues 12.6, 12.7, 15.4): the test is the client,
``raw_agent.py`` the agent, the real daemon and Synapse behind."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.agents.raw import RawRun, permission_line
from tests.support.human import content

pytestmark = pytest.mark.e2e


async def raw(station: Any, tmp_path: Path, *more: str) -> RawRun:
    return await RawRun.start(["--url", station.api_url, "--token", station.token, *more], tmp_path, station.exe)


async def pending(station: Any, sid: str, n: int = 1, timeout: float = 30) -> list[dict[str, Any]]:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        st, recs = await station.ahttp("GET", f"/permissions?session={sid}")
        assert st == 200, recs
        if len(recs) >= n:
            return list(recs)
        assert asyncio.get_running_loop().time() < deadline, f"{len(recs)} pending for {sid}, not {n}"
        await asyncio.sleep(0.05)


def cancel_line(sid: str, method: str = "session/cancel") -> str:
    return '{"jsonrpc":"2.0","method":"' + method + '","params":{"sessionId":' + json.dumps(sid) + "}}"


def index_of(lines: list[bytes], pred: Any) -> int:
    return next(i for i, x in enumerate(lines) if pred(x))


async def test_escaped_request_permission_is_caught_and_posted(station: Any, tmp_path: Path, sid: str) -> None:
    r = await raw(station, tmp_path)
    try:
        await r.agent_sends(permission_line(7, sid, method="session/request_permissio\\u006e", title="Escaped"))
        p = await station.prompt_for(sid)
        assert p, "an escaped request_permission must reach the room, not the client"
        assert not any(b"request_permissio" in x for x in r.client_lines), r.client_lines
        (rec,) = await pending(station, sid)
        assert rec["title"] == "Escaped" and rec["cwd"] is None
        await station.alice.text("1", reply_to=p["event_id"])
        reply = await r.agent_reply(7)
        assert reply["result"]["outcome"] == {"outcome": "selected", "optionId": "allow_once"}
        assert (await station.record(rec["id"], wait=None))["outcome"]["option_id"] == "allow_once"
    finally:
        await r.close()


async def test_escaped_session_cancel_cancels(station: Any, tmp_path: Path, sid: str) -> None:
    r = await raw(station, tmp_path)
    try:
        await r.agent_sends(permission_line(8, sid))
        p = await station.prompt_for(sid)
        (rec,) = await pending(station, sid)
        line = cancel_line(sid, "session/canc\\u0065l")
        await r.send(line)
        reply = await r.agent_reply(8)
        assert reply["result"]["outcome"] == {"outcome": "cancelled"}
        got = await station.record(rec["id"], wait=None)
        assert got["state"] == "cancelled"
        # the answer first, then the cancel, relayed as it came (a moment later: wait for it)
        await r.wait(lambda: line.encode() + b"\n" in r.agent_lines(), what="the cancel relayed")
        lines = r.agent_lines()
        assert index_of(lines, lambda x: b'"id":8' in x) < lines.index(line.encode() + b"\n")
        assert p
        edit = await station.edit_of(p["event_id"])
        assert edit and "Cancelled" in content(edit)["m.new_content"]["body"]
    finally:
        await r.close()


async def test_cancel_racing_an_answer_ends_agreed(station: Any, tmp_path: Path, sid: str) -> None:
    """A ``1`` in the room and a ``session/cancel`` at about the same time: whichever wins, the agent,
    the record and the room edit say the same. Run a few times with the cancel shifted a little."""
    r = await raw(station, tmp_path)
    seen: set[str] = set()
    try:
        for i, delay in enumerate([0.0, 0.02, 0.05, 0.1, 0.0, 0.15]):
            rpc = 100 + i
            await r.agent_sends(permission_line(rpc, sid, tool_call_id=f"call_{i}", title=f"Race {i}"))
            p = await station.prompt_for(sid, seq=i + 1)
            assert p, f"round {i}: no prompt"

            async def cancel_later(pause: float) -> None:
                await asyncio.sleep(pause)
                await r.send(cancel_line(sid))

            await asyncio.gather(station.alice.text("1", reply_to=p["event_id"]), cancel_later(delay))
            reply = (await r.agent_reply(rpc))["result"]["outcome"]
            rec = await station.record(f"{sid}:{i + 1}", wait=None)
            edit = await station.edit_of(p["event_id"])
            assert edit, f"round {i}: the prompt was not edited"
            body = content(edit)["m.new_content"]["body"]
            if reply["outcome"] == "selected":
                assert rec["state"] == "resolved" and rec["outcome"]["option_id"] == reply["optionId"], (i, rec)
                assert "Approved" in body and "Cancelled" not in body, (i, body)
                seen.add("answer")
            else:
                assert rec["state"] == "cancelled" and rec["outcome"]["option_id"] is None, (i, rec)
                assert "Cancelled" in body and "Approved" not in body, (i, body)
                seen.add("cancel")
            await r.wait(lambda n=i: sum(b"session/cancel" in x for x in r.agent_lines()) > n,
                         what=f"cancel {i} relayed")
            lines = r.agent_lines()
            cancels = [j for j, x in enumerate(lines) if b"session/cancel" in x]
            assert index_of(lines, lambda x, n=rpc: f'"id":{n},'.encode() in x and b"result" in x) < cancels[i]
    finally:
        await r.close()
    assert seen  # which side won is the machine's business; that they agree is ours


async def test_cancel_request_withdraws_the_permission_request(station: Any, tmp_path: Path, sid: str) -> None:
    r = await raw(station, tmp_path)
    try:
        await r.agent_sends(permission_line(9, sid, title="Withdraw me"))
        p = await station.prompt_for(sid)
        assert p
        (rec,) = await pending(station, sid)
        await r.agent_sends('{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":9}}')
        reply = await r.agent_reply(9)
        assert reply["error"]["code"] == -32800 and "result" not in reply
        got = await station.record(rec["id"], wait=None)
        assert got["state"] == "cancelled" and got["outcome"]["feedback"] == "withdrawn by the agent"
        edit = await station.edit_of(p["event_id"])
        assert edit and "withdrawn by the agent" in content(edit)["m.new_content"]["body"]
        assert not any(b"cancel_request" in x for x in r.client_lines)  # the client never had the request
        mark = station.alice.mark()
        await station.alice.text("1", reply_to=p["event_id"])
        notice = await station.notice_after(mark, contains="Already settled")
        assert notice, "a late answer to a withdrawn request gets a notice"
        assert (await station.record(rec["id"], wait=None))["state"] == "cancelled"
    finally:
        await r.close()


AGENT_TO_CLIENT = [
    '{"jsonrpc":"2.0","id":"el-1","method":"_vendor/elicit","params":{"message":"Pick","requestedSchema":{}}}',
    '{ "method" : "session/update", "jsonrpc":"2.0", "params":{"sessionId":"x","update":{"sessionUpdate":'
    '"config_option_update","value":"caf\\u00e9"}} }',
    '{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"not-ours"}}',
    '{"jsonrpc":"2.0","method":"_vendor/n\\u006fte","params":{"a":[1,2.50,1e3]}}',
]
CLIENT_TO_AGENT = [
    '{"jsonrpc":"2.0","id":"el-1","result":{"action":"accept","content":{"x":"\\u2603"}}}',
    '{"jsonrpc":"2.0","id":41,"method":"session/close","params":{"sessionId":"x"}}',
    '{"jsonrpc":"2.0","id":42,"method":"session/set_config_option","params":{"sessionId":"x","configId":"m",'
    '"value":"fast"}}',
    '{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":42}}',
    '{"jsonrpc":"2.0","id":43,"method":"_unknown/thing","params":{"cancel":true,"cwd":5}}',
]


async def test_unknown_acp_messages_pass_byte_for_byte(station: Any, tmp_path: Path) -> None:
    r = await raw(station, tmp_path)
    try:
        for line in AGENT_TO_CLIENT:
            await r.agent_sends(line)
        for line in CLIENT_TO_AGENT:
            await r.send(line)
        want_client = [x.encode() + b"\n" for x in AGENT_TO_CLIENT]
        await r.wait(lambda: len(r.client_lines) >= len(want_client), what="lines at the client")
        assert r.client_lines == want_client
        want_agent = [x.encode() + b"\n" for x in CLIENT_TO_AGENT]
        await r.wait(lambda: [x for x in r.agent_lines() if b"_test/emit" not in x] == want_agent,
                     what="the client's lines at the agent, unchanged")
    finally:
        await r.close()


async def test_cwd_of_session_new_reaches_the_record(station: Any, tmp_path: Path, sid: str) -> None:
    r = await raw(station, tmp_path, "--label", "cwd-agent")
    try:
        new = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/srv/app", "mcpServers": []}}
        await r.send(new)
        await r.agent_sends(json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": sid}}))
        await r.wait(lambda: r.client_lines, what="the session/new answer")
        await r.agent_sends(permission_line(5, sid))
        (rec,) = await pending(station, sid)
        assert rec["cwd"] == "/srv/app" and rec["label"] == "cwd-agent"
        st, _ = await station.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "deny"})
        assert st == 200
        assert (await r.agent_reply(5))["result"]["outcome"]["optionId"] == "reject_once"
    finally:
        await r.close()
