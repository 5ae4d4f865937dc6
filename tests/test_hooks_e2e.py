"""`permission-bot hook` and ``POST /hooks/claude-code`` end to end: the real daemon and Synapse."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.answers import KEYCAPS
from bot.demo.homeserver import free_port
from tests.support.human import content
from tests.support.station import AGENT_TOKEN, TOKEN, Station

pytestmark = pytest.mark.e2e
FIX = Path(__file__).parent / "fixtures" / "hooks"


def hook_input(name: str, sid: str, **tool_input: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIX / f"{name}.json").read_text().replace("<cwd>", "/work/proj"))
    data = data.get("body", data)
    data["session_id"] = sid
    data["tool_input"].update(tool_input)
    return data


async def start_hook(station: Station, data: Any, *args: str, cli: str = "claude-code") -> asyncio.subprocess.Process:
    env = dict(os.environ, PERMISSION_BOT_URL=station.api_url, PERMISSION_BOT_TOKEN=TOKEN)
    proc = await asyncio.create_subprocess_exec(
        station.exe,
        "hook",
        cli,
        *args,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(data).encode())
    proc.stdin.close()
    return proc


async def finish(proc: asyncio.subprocess.Process, timeout: float = 30) -> tuple[int, Any, str]:
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, (json.loads(out) if out.strip() else None), err.decode()


async def test_answered_by_number_prints_allow(station: Station, sid: str) -> None:
    proc = await start_hook(station, hook_input("claude-code-PermissionRequest-Bash", sid))
    prompt = await station.prompt_for(sid)
    assert prompt, "no prompt"
    body = content(prompt)["body"]
    assert "Run: touch /work/proj/M1" in body and "2. Allow for this session" in body
    await station.alice.text("1", reply_to=prompt["event_id"])
    code, out, _ = await finish(proc)
    assert code == 0
    assert out == {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}


async def test_allow_for_this_session_by_name_echoes_a_covering_rule(station: Station, sid: str) -> None:
    proc = await start_hook(station, hook_input("claude-code-PermissionRequest-Bash-sdkhost", sid))
    prompt = await station.prompt_for(sid)
    assert prompt
    await station.alice.text("allow for this session", reply_to=prompt["event_id"])
    code, out, _ = await finish(proc)
    assert code == 0
    decision = out["hookSpecificOutput"]["decision"]
    assert decision["behavior"] == "allow"
    assert decision["updatedPermissions"] == [
        {
            "type": "addRules",
            "rules": [{"toolName": "Bash", "ruleContent": "touch /work/proj/M1"}],
            "behavior": "allow",
            "destination": "session",
        }
    ]


async def test_reaction_denies_pre_tool_use(station: Station, sid: str) -> None:
    proc = await start_hook(station, hook_input("claude-code-PreToolUse-Edit", sid))
    prompt = await station.prompt_for(sid)
    assert prompt
    assert "+gamma" in content(prompt)["body"] or "+gamma" in json.dumps(content(prompt)["subject"])
    await station.alice.react(prompt["event_id"], KEYCAPS[1])  # 2 = Deny (no session option for PreToolUse)
    code, out, _ = await finish(proc)
    assert code == 0 and out["hookSpecificOutput"]["permissionDecision"] == "deny"


async def test_codex_deny_with_feedback_becomes_the_message(station: Station, sid: str) -> None:
    proc = await start_hook(station, hook_input("codex-PermissionRequest-Bash", sid), cli="codex")
    prompt = await station.prompt_for(sid)
    assert prompt and "2. Deny" in content(prompt)["body"]
    await station.bob.text("1", reply_to=prompt["event_id"])  # attack: bob may not answer
    _, rec = await station.ahttp("GET", f"/permissions/{sid}:1?wait=3")
    assert rec["state"] == "pending" and proc.returncode is None  # bob's allow did not count
    await station.alice.text("2 - not on main", reply_to=prompt["event_id"])
    code, out, _ = await finish(proc)
    assert code == 0
    assert out == {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "deny", "message": "not on main"},
        }
    }


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM", "stdout closed"])
async def test_hook_gone_leaves_no_ghost_prompt(station: Station, sid: str, how: str) -> None:
    proc = await start_hook(station, hook_input("claude-code-PermissionRequest-Bash", sid))
    prompt = await station.prompt_for(sid)
    assert prompt
    if how == "stdout closed":  # the CLI stopped listening (it answered in the terminal)
        proc._transport.get_pipe_transport(1).close()  # type: ignore[attr-defined]
    else:
        proc.send_signal(getattr(signal, how))
    await asyncio.wait_for(proc.wait(), 15)
    edit = await station.edit_of(prompt["event_id"])
    body = content(edit)["m.new_content"]["body"] if edit else ""
    assert "Cancelled by claude-code hook" in body and "the hook went away" in body and "answered elsewhere" not in body
    _, recs = await station.ahttp("GET", f"/permissions/{sid}:1")
    assert recs["state"] == "cancelled" and recs["outcome"]["answered_by"] == "claude-code hook"
    mark = station.alice.mark()
    await station.alice.text("1", reply_to=prompt["event_id"])
    assert await station.notice_after(mark, contains="Already settled")


async def test_http_hook_needs_the_token_and_answers(station: Station, sid: str) -> None:
    data = hook_input("claude-code-http-PreToolUse-Bash", sid)
    st, _ = await station.ahttp("POST", "/hooks/claude-code", data, token=None)
    assert st == 401
    st, _ = await station.ahttp("POST", "/hooks/claude-code", data, token="wrong")
    assert st == 401
    st, err = await station.ahttp("POST", "/hooks/claude-code", {**data, "hook_event_name": "Stop"})
    assert st == 422 and "hook_event_name" in err["reason"]
    hostile: list[tuple[Any, str]] = [
        ([data], "JSON object"),
        ({**data, "session_id": "a/../b"}, "session_id"),
        ({**data, "tool_input": {"command": "x" * 1_100_000}}, "1 MB"),
    ]
    for body, why in hostile:
        st, err = await station.ahttp("POST", "/hooks/claude-code", body)
        assert st == 422 and why in err["reason"], (st, err)
    for raw in (b"{not json", b"[" * 50_000 + b"]" * 50_000):
        st, err = await station.ahttp("POST", "/hooks/claude-code", None, raw=raw)
        assert st == 422, (st, err)
    _, pending = await station.ahttp("GET", f"/permissions?session={sid}")
    assert pending == []  # nothing was posted for the refused calls
    call = asyncio.ensure_future(station.ahttp("POST", "/hooks/claude-code", data))
    prompt = await station.prompt_for(sid)
    assert prompt
    await station.alice.text("1", reply_to=prompt["event_id"])
    st, out = await call
    assert st == 200 and out["hookSpecificOutput"]["permissionDecision"] == "allow"


async def test_http_hook_hangup_withdraws(station: Station, sid: str) -> None:
    data = hook_input("claude-code-http-PermissionRequest-Bash", sid)
    async with aiohttp.ClientSession() as http:
        call = asyncio.ensure_future(
            http.post(f"{station.api_url}/hooks/claude-code", json=data, headers={"Authorization": f"Bearer {TOKEN}"})
        )
        prompt = await station.prompt_for(sid)
        assert prompt
        call.cancel()
    edit = await station.edit_of(prompt["event_id"])
    assert edit and "the hook went away" in content(edit)["m.new_content"]["body"]


async def test_same_request_by_both_doors_is_posted_once(station: Station, sid: str) -> None:
    proxy_id = secrets.token_hex(16)  # the proxy run's secret: it claims the session it relays (session/new)
    st, _ = await station.ahttp("POST", "/sessions/claim", {"sessionId": sid, "key": f"{proxy_id}:0"})
    assert st == 200
    data = hook_input("claude-code-PermissionRequest-Bash", sid)
    proc = await start_hook(station, data)
    prompt = await station.prompt_for(sid, seq=1)
    assert prompt
    acp = {
        "sessionId": sid,
        "key": f"{proxy_id}:1",
        "options": [{"optionId": "a", "name": "Allow", "kind": "allow_once"}],
        "toolCall": {"toolCallId": "toolu_1", "title": "touch", "rawInput": data["tool_input"]},
    }
    await station.post(acp)
    code, out, _ = await finish(proc)
    assert code == 0 and out is None  # the hook stands down: the ACP door answers
    _, pending = await station.ahttp("GET", f"/permissions?session={sid}")
    assert [r["tool_call_id"] for r in pending] == ["toolu_1"]
    # and the other order: the ACP door's request is pending, the hook does not post another
    code, out, _ = await finish(await start_hook(station, data))
    assert code == 0 and out is None
    _, pending = await station.ahttp("GET", f"/permissions?session={sid}")
    assert [r["id"] for r in pending] == [f"{sid}:2"]
    await station.ahttp("POST", f"/permissions/{sid}:2", {"decision": "cancel"})


async def test_a_plain_submission_never_withdraws_a_held_hook(station: Station, sid: str) -> None:
    """Issue 32 item 8: while the hook holds ``git push --force``, the model (which read an agent token)
    submits the same tool input under the hook's session id: with no key, with a key of the proxy's form,
    after a claim of its own (refused: the hook asked first) and under another token. None of them is the
    agent's other door: the hook's request stays pending and its answer still reaches the hook."""
    data = hook_input("claude-code-PermissionRequest-Bash", sid, command="git push --force")
    proc = await start_hook(station, data)
    prompt = await station.prompt_for(sid, seq=1)
    assert prompt
    forged = secrets.token_hex(16)
    st, got = await station.ahttp("POST", "/sessions/claim", {"sessionId": sid, "key": f"{forged}:0"})
    assert st == 409 and got["error"] == "session_claimed", got
    twin = {"sessionId": sid, "options": [{"optionId": "a", "name": "Allow", "kind": "allow_once"}],
            "toolCall": {"toolCallId": "toolu_x", "title": "push", "rawInput": data["tool_input"]}}
    for n, (key, token) in enumerate([(None, TOKEN), (f"{forged}:1", TOKEN), (f"{forged}:2", AGENT_TOKEN[1])]):
        body = {**twin, "toolCall": {**twin["toolCall"], "toolCallId": f"toolu_{n}"}}
        if key:
            body["key"] = key
        await station.post(body, token=token)
    await asyncio.sleep(2.5)  # the held hook looks for a twin every second
    _, hook_rec = await station.ahttp("GET", f"/permissions/{sid}:1")
    assert hook_rec["state"] == "pending", hook_rec["outcome"]
    assert proc.returncode is None  # still held
    await station.alice.text("1", reply_to=prompt["event_id"])
    code, out, _ = await finish(proc)
    assert code == 0 and out["hookSpecificOutput"]["decision"]["behavior"] == "allow"
    for n in (2, 3, 4):
        await station.ahttp("POST", f"/permissions/{sid}:{n}", {"decision": "cancel"})


@pytest.mark.parametrize(("fallback", "behavior"), [("ask", None), ("deny", "deny")])
async def test_daemon_down_never_allows(fallback: str, behavior: str | None, sid: str) -> None:
    env = dict(os.environ, PERMISSION_BOT_URL=f"http://127.0.0.1:{free_port()}", PERMISSION_BOT_TOKEN=TOKEN)
    proc = await asyncio.create_subprocess_exec(
        _exe(),
        "hook",
        "claude-code",
        "--fallback",
        fallback,
        "--connect-timeout",
        "1s",
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate(json.dumps(hook_input("claude-code-PermissionRequest-Bash", sid)).encode())
    assert proc.returncode == 0
    assert len(err.decode().strip().splitlines()) == 1 and "unreachable" in err.decode()
    if behavior is None:  # no decision; Claude Code shows its user why
        assert "unreachable" in json.loads(out)["systemMessage"] and "hookSpecificOutput" not in json.loads(out)
    else:
        assert json.loads(out)["hookSpecificOutput"]["decision"]["behavior"] == "deny"


def _exe() -> str:
    from tests.support.station import exe_path

    return exe_path()


async def test_daemon_restart_withdraws_what_no_hook_waits_for(station: Station, sid: str) -> None:
    proc = await start_hook(station, hook_input("claude-code-PermissionRequest-WebFetch", sid))
    prompt = await station.prompt_for(sid)
    assert prompt
    await station.restart_daemon(kill=True)
    code, out, err = await finish(proc)
    assert code == 0 and "connection lost" in err  # fail safe: no decision, the terminal asks
    assert set(out) == {"systemMessage"} and "connection lost" in out["systemMessage"]
    edit = await station.edit_of(prompt["event_id"], timeout=40)
    assert edit and "the daemon restarted" in content(edit)["m.new_content"]["body"]
