"""Issue 15.3 end to end: "Allow for this session" from the room, through the real proxy and Synapse.

``s`` (or 🔁) answers allow once and adds a rule; the next identical request of the same session
settles at once "by session rule (set by @alice)" and is still posted, settled. The attacks: the agent
appends to the command, or switches session ids, or another agent (another proxy run) reuses the
session id: none of these is allowed by the rule. Bob's ``s`` does nothing. Rules are listed and
revoked over the CLI and the API, and end with the session (``session/close``, the agent's exit).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.agents.raw import RawRun, permission_line
from tests.support.human import content
from tests.support.station import Station

pytestmark = pytest.mark.e2e


async def proxy(station: Station, tmp_path: Path) -> RawRun:
    return await RawRun.start(["--url", station.api_url, "--token", station.token], tmp_path, station.exe)


def line(rpc_id: int, sid: str, command: str, n: str) -> str:
    return permission_line(rpc_id, sid, command=command, tool_name="Bash", tool_call_id=f"call_{n}")


async def outcome(run: RawRun, rpc_id: int, timeout: float = 30) -> Any:
    return (await run.agent_reply(rpc_id, timeout))["result"]["outcome"]


async def pending_ids(station: Station) -> set[str]:
    _, recs = await station.ahttp("GET", "/permissions")
    return {r["id"] for r in recs}


async def pending_has(station: Station, want: set[str]) -> bool:
    return want <= await pending_ids(station)


async def no_rules(station: Station, sid: str) -> bool:
    return not await rules(station, sid)


async def until(pred: Callable[[], Awaitable[bool]], timeout: float = 30) -> bool:
    """Wait on a condition, not a sleep."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await pred():
            return True
        await asyncio.sleep(0.1)
    return False


async def rules(station: Station, sid: str) -> list[dict[str, Any]]:
    st, body = await station.ahttp("GET", f"/rules?session={sid}")
    assert st == 200, body
    return list(body["rules"])


async def set_rule(station: Station, run: RawRun, sid: str, command: str, *, react: bool = False) -> None:
    """The agent asks once; alice answers ``s`` (or 🔁): allow once, and the rule exists."""
    await run.agent_sends(line(1, sid, command, "first"))
    prompt = await station.prompt_for(sid, seq=1)
    assert prompt
    body = content(prompt)
    assert "3. Allow for this session (this command)" in body["body"]
    assert "<li>Allow for this session (this command)</li>" in body["formatted_body"]
    assert [o["id"] for o in body["options"]] == ["allow_once", "reject_once"]  # v2: the agent's options only
    start = station.alice.mark()
    if react:
        await station.alice.react(prompt["event_id"], "\U0001f501")
    else:
        await station.alice.text("s", reply_to=prompt["event_id"])
    assert await outcome(run, 1) == {"outcome": "selected", "optionId": "allow_once"}
    rid = f"{sid}:1"
    rec = await station.record(rid)
    assert rec["outcome"]["answered_by"] == station.alice.user_id
    assert [r["command"] for r in await rules(station, sid)] == [command]
    told = await station.notice_after(start, contains=f"Allowed for the rest of session {sid}: Bash {command}")
    assert told and "permissions rules revoke" in content(told)["body"]


async def test_s_allows_once_and_the_same_command_again_settles_by_session_rule(
    station: Station, sid: str, tmp_path: Path
) -> None:
    run = await proxy(station, tmp_path)
    other = await proxy(station, tmp_path)
    try:
        await set_rule(station, run, sid, "rm -rf build")
        await run.agent_sends(line(2, sid, "rm -rf build", "again"))
        assert await outcome(run, 2) == {"outcome": "selected", "optionId": "allow_once"}
        rec = await station.record(f"{sid}:2")
        assert rec["outcome"]["via"] == "rule"
        assert rec["outcome"]["answered_by"] == f"session rule (set by {station.alice.user_id})"
        prompt = await station.prompt_for(sid, seq=2)
        assert prompt, "a request settled by a session rule is still posted, for the record"
        assert f"by session rule (set by {station.alice.user_id})" in content(prompt)["body"]  # posted settled

        # The attacks: a longer command, a chained one, another session id, another agent with this session id.
        await run.agent_sends(line(3, sid, "rm -rf build ~", "longer"))
        await run.agent_sends(line(4, sid, "rm -rf build; rm -rf ~", "chained"))
        await run.agent_sends(line(5, sid + "x", "rm -rf build", "switched"))
        await other.agent_sends(line(1, sid, "rm -rf build", "other_agent"))
        want = {f"{sid}:3", f"{sid}:4", f"{sid}x:1", f"{sid}:5"}
        assert await until(lambda: pending_has(station, want)), "none of these may be allowed by the session rule"
        assert not any(m.get("id") in (3, 4, 5) for m in run.agent_json() if "method" not in m)
    finally:
        await station.drain()
        await run.close()
        await other.close()


async def test_reaction_sets_a_rule_listed_and_revoked_over_cli_and_api(
    station: Station, sid: str, tmp_path: Path
) -> None:
    run = await proxy(station, tmp_path)
    try:
        await set_rule(station, run, sid, "make test", react=True)
        listed = station.cli("permissions", "rules", "--session", sid, "--json")
        assert listed.returncode == 0, listed.stderr
        [rule] = json.loads(listed.stdout)
        assert rule["command"] == "make test" and rule["set_by"] == station.alice.user_id and rule["tool"] == "Bash"
        text = station.cli("permissions", "rules", "--session", sid)
        assert "command make test" in text.stdout and f"set by {station.alice.user_id}" in text.stdout
        assert (await station.ahttp("DELETE", f"/rules/{rule['id']}", token=None))[0] == 401
        assert (await station.ahttp("GET", "/rules", token=None))[0] == 401
        revoked = station.cli("permissions", "rules", "revoke", rule["id"])
        assert revoked.returncode == 0 and "revoked session rule" in revoked.stdout, revoked.stderr
        again = station.cli("permissions", "rules", "revoke", rule["id"])
        assert again.returncode == 1 and "404" in again.stderr
        assert (await station.ahttp("DELETE", f"/rules/{rule['id']}"))[0] == 404
        assert (await station.ahttp("DELETE", "/rules/x1"))[0] == 404
        for bad in ({}, {"key": "agent-picked"}, {"key": "0123456789abcdef:1", "sessionId": 5}, []):
            st, body = await station.ahttp("POST", "/rules/end", bad)
            assert st == 422 and body["error"] == "invalid_request", (bad, body)
        assert await rules(station, sid) == []
        await run.agent_sends(line(2, sid, "make test", "after_revoke"))  # a revoked rule stops matching
        assert (await station.prompt_for(sid, seq=2)) is not None
        assert f"{sid}:2" in await pending_ids(station)
    finally:
        await station.drain()
        await run.close()


async def test_bobs_s_changes_nothing(station: Station, sid: str, tmp_path: Path) -> None:
    run = await proxy(station, tmp_path)
    try:
        await run.agent_sends(line(1, sid, "git push --force", "bob"))
        prompt = await station.prompt_for(sid, seq=1)
        assert prompt
        await station.bob.text("s", reply_to=prompt["event_id"])
        await station.bob.react(prompt["event_id"], "\U0001f501")
        await station.alice.text("2", reply_to=prompt["event_id"])  # handled after bob's, in timeline order
        assert await outcome(run, 1) == {"outcome": "selected", "optionId": "reject_once"}
        assert (await station.record(f"{sid}:1"))["outcome"]["answered_by"] == station.alice.user_id
        assert await rules(station, sid) == []
    finally:
        await station.drain()
        await run.close()


async def test_a_sessions_end_drops_its_rules(station: Station, sid: str, tmp_path: Path) -> None:
    run = await proxy(station, tmp_path)
    try:
        await set_rule(station, run, sid, "ls -la")
        await run.send({"jsonrpc": "2.0", "id": 90, "method": "session/close", "params": {"sessionId": sid}})
        await run.wait(lambda: b"session/close" in run.agent_log.read_bytes(), what="session/close relayed")
        assert await until(lambda: no_rules(station, sid)), "session/close ends the session's rules"
        await run.agent_sends(line(2, sid, "ls -la", "after_close"))
        assert (await station.prompt_for(sid, seq=2)) is not None
    finally:
        await station.drain()
        await run.close()
    run = await proxy(station, tmp_path)
    sid2 = sid + "_exit"
    await set_rule(station, run, sid2, "ls -la")
    await run.close()  # the agent exits: every session of this proxy run ends
    assert await rules(station, sid2) == []


async def test_rules_survive_a_restart_and_idle_ones_expire(station: Station, sid: str, tmp_path: Path) -> None:
    run = await proxy(station, tmp_path)
    try:
        await set_rule(station, run, sid, "du -sh .")
        await station.restart_daemon()
        assert [r["command"] for r in await rules(station, sid)] == ["du -sh ."]  # durable, in the inbox
        station.prompts["session_rule_ttl"] = "2s"
        station.write_config()
        await station.restart_daemon()
        assert await until(lambda: no_rules(station, sid), 20), "a rule idle longer than the ttl is dropped"
    finally:
        station.prompts.pop("session_rule_ttl", None)
        station.write_config()
        await station.restart_daemon()
        await station.drain()
        await run.close()


def edit_line(rpc_id: int, sid: str, path: str, new_text: str) -> str:
    """A Write as Claude Code's adapter sends it: kind edit, the file as location and diff."""
    tc = {"toolCallId": f"edit_{rpc_id}", "title": f"Write {path}", "kind": "edit",
          "rawInput": {"file_path": path, "content": new_text}, "locations": [{"path": path}],
          "content": [{"type": "diff", "path": path, "oldText": None, "newText": new_text}],
          "_meta": {"claudeCode": {"toolName": "Write"}}}
    options = [{"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
               {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"}]
    return json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": "session/request_permission",
                       "params": {"sessionId": sid, "toolCall": tc, "options": options}})


async def test_session_on_an_edit_allows_the_same_file_only(station: Station, sid: str, tmp_path: Path) -> None:
    run = await proxy(station, tmp_path)
    try:
        await run.agent_sends(edit_line(1, sid, "/w/notes.md", "one"))
        prompt = await station.prompt_for(sid, seq=1)
        assert prompt and "3. Allow for this session (these files)" in content(prompt)["body"]
        await station.alice.text("Session - keep going", reply_to=prompt["event_id"])
        assert await outcome(run, 1) == {"outcome": "selected", "optionId": "allow_once"}
        [rule] = await rules(station, sid)
        assert rule["paths"] == ["/w/notes.md"] and rule["tool"] == "Write" and rule["command"] is None
        await run.agent_sends(edit_line(2, sid, "/w/notes.md", "two"))
        assert await outcome(run, 2) == {"outcome": "selected", "optionId": "allow_once"}
        await run.agent_sends(edit_line(3, sid, "/w/other.md", "one"))
        assert await until(lambda: pending_has(station, {f"{sid}:3"}))
    finally:
        await station.drain()
        await run.close()
