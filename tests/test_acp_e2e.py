"""`permission-bot acp` end to end: SDK client -> proxy -> SDK agent, the real daemon and Synapse."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Any

import pytest

from tests.agents.session import ClientRun, script

pytestmark = pytest.mark.e2e


def _content(ev: dict[str, Any]) -> dict[str, Any]:
    c = ev.get("content")
    return c if isinstance(c, dict) else {}


async def http(station: Any, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """``station.http`` without blocking the loop (it may be sync or async)."""
    r = await asyncio.to_thread(station.http, method, path, body)
    if inspect.isawaitable(r):
        r = await r
    return r  # type: ignore[no-any-return]


async def prompt_for(station: Any, session_id: str, timeout: float = 30) -> dict[str, Any] | None:
    def pred(e: dict[str, Any]) -> bool:
        c = _content(e)
        return (
            e.get("type") == "m.room.message"
            and e.get("sender") == station.bot_id
            and c.get("suite_event_type") == "dev.agentpod.permission.v2"
            and (c.get("m.relates_to") or {}).get("rel_type") != "m.replace"
            and c.get("session_id") == session_id
        )

    ev: dict[str, Any] | None = await station.alice.wait(pred, timeout)
    return ev


async def pending_for(station: Any, session_id: str, n: int = 1, timeout: float = 30) -> list[dict[str, Any]]:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        st, recs = await http(station, "GET", f"/permissions?session={session_id}")
        assert st == 200, recs
        if len(recs) >= n:
            return list(recs)
        assert asyncio.get_running_loop().time() < deadline, f"{len(recs)} pending for {session_id}, not {n}"
        await asyncio.sleep(0.1)


async def record(station: Any, request_id: str) -> dict[str, Any]:
    st, rec = await http(station, "GET", f"/permissions/{request_id}")
    assert st == 200, rec
    return dict(rec)


async def start(
    station: Any, tmp_path: Path, scripts: Any, sid: str, *more: str, client_flags: list[str] | None = None
) -> ClientRun:
    flags = ["--url", station.api_url, "--token", station.token, *more]
    c = await ClientRun.start(
        scripts, flags, tmp_path, exe=station.exe, client_flags=client_flags, env={"SCRIPTED_SESSION": sid}
    )
    assert await c.session_id(60) == sid
    return c


async def test_all_four_kinds_prompt_and_reply_by_number(station: Any, tmp_path: Path, sid: str) -> None:
    c = await start(station, tmp_path, script(title="Reply by number"), sid, "--label", "e2e-agent")
    try:
        p = await prompt_for(station, sid)
        assert p, "no prompt for an ACP permission request"
        c0 = _content(p)
        assert c0["request_id"] == f"{sid}:1"
        assert [o["id"] for o in c0["options"]] == ["allow_once", "allow_always", "reject_once", "reject_always"]
        (rec,) = await pending_for(station, sid)
        assert rec["label"] == "e2e-agent" and rec["title"] == "Reply by number"
        await station.alice.text("2", reply_to=p["event_id"])
        out = await c.outcome(30)
        assert out["outcome"] == "selected" and out["optionId"] == "allow_always"
        rec = await record(station, f"{sid}:1")
        assert rec["state"] == "resolved" and rec["digest"] == out["sent_digest"]
        done = await c.wait_line(lambda d: d.get("event") == "done")
        assert done["client_permission_requests"] == 0
    finally:
        await c.close()


async def test_sparse_request_is_completed_and_approved_over_http(station: Any, tmp_path: Path, sid: str) -> None:
    c = await start(station, tmp_path, script(title="Sparse one", command="make deploy", sparse=True), sid)
    try:
        (rec,) = await pending_for(station, sid)
        assert rec["title"] == "Sparse one" and rec["tool_kind"] == "execute"
        assert rec["raw_input"] == {"command": "make deploy"}
        assert [loc.get("path") for loc in rec["locations"]] == ["apps/hub"]
        assert rec["params"]["toolCall"] == {"toolCallId": "call_1"}  # kept as sent
        p = await prompt_for(station, sid)
        assert p and "Sparse one" in _content(p)["body"] and "make deploy" in str(_content(p)["subject"])
        st, _ = await http(station, "POST", f"/permissions/{rec['id']}", {"decision": "approve"})
        assert st == 200
        out = await c.outcome(30)
        assert out["optionId"] == "allow_once" and out["sent_digest"] == rec["digest"]
    finally:
        await c.close()


async def test_session_cancel_settles_pending_as_cancelled(station: Any, tmp_path: Path, sid: str) -> None:
    scripts = [script(tool_call_id="call_1"), script(tool_call_id="call_2", title="Second")]
    c = await start(station, tmp_path, scripts, sid, client_flags=["--cancel-after", "3"])
    try:
        recs = await pending_for(station, sid, 2, timeout=3)
        outs = await c.outcomes(2, 30)
        assert [o["outcome"] for o in outs] == ["cancelled", "cancelled"]
        for r in recs:
            got = await record(station, r["id"])
            assert got["state"] == "cancelled" and got["outcome"]["option_id"] is None
        done = await c.wait_line(lambda d: d.get("event") == "done")
        assert done["stop_reasons"] == ["cancelled", "cancelled"]
    finally:
        await c.close()


async def test_agent_exit_settles_pending(station: Any, tmp_path: Path, sid: str) -> None:
    c = await start(station, tmp_path, script(exit_after=3, exit_code=3), sid)
    try:
        (rec,) = await pending_for(station, sid)
        assert await c.finish(30) == 3
        got = await record(station, rec["id"])
        assert got["state"] == "cancelled"
    finally:
        await c.close()


async def test_client_leaving_settles_pending(station: Any, tmp_path: Path, sid: str) -> None:
    c = await start(station, tmp_path, script(), sid, client_flags=["--exit-after", "3"])
    try:
        (rec,) = await pending_for(station, sid)
        assert await c.finish(30) == 0
        assert (await record(station, rec["id"]))["state"] == "cancelled"
    finally:
        await c.close()


async def test_daemon_kill_and_restart_mid_pending_loses_nothing(station: Any, tmp_path: Path, sid: str) -> None:
    c = await start(station, tmp_path, script(title="Survive a restart"), sid)
    try:
        p = await prompt_for(station, sid)
        assert p
        station.kill_daemon()
        try:
            await asyncio.sleep(2)
        finally:
            station.start_daemon()
            await station.wait_healthy()
        (rec,) = await pending_for(station, sid)
        assert rec["id"] == f"{sid}:1"
        await station.alice.text("1", reply_to=p["event_id"])
        out = await c.outcome(60)
        assert out["optionId"] == "allow_once"
        await asyncio.sleep(1)
        prompts = [e for e in station.alice.events if _is_prompt_for(station, e, sid)]
        assert len(prompts) == 1, "the restart made a second prompt"
    finally:
        await c.close()


async def test_daemon_down_when_the_request_comes(station: Any, tmp_path: Path, sid: str) -> None:
    station.kill_daemon()
    try:
        c = await start(station, tmp_path, script(title="Wait for me"), sid, "--connect-timeout", "90s")
        await asyncio.sleep(1.5)  # the agent has asked; the proxy is retrying
    finally:
        station.start_daemon()
        await station.wait_healthy()
    try:
        (rec,) = await pending_for(station, sid)
        st, _ = await http(station, "POST", f"/permissions/{rec['id']}", {"decision": "deny"})
        assert st == 200
        out = await c.outcome(30)
        assert out["optionId"] == "reject_once"
        assert "fallback_" not in c.stderr()
    finally:
        await c.close()


def _is_prompt_for(station: Any, e: dict[str, Any], sid: str) -> bool:
    c = _content(e)
    return (
        e.get("sender") == station.bot_id
        and c.get("suite_event_type") == "dev.agentpod.permission.v2"
        and (c.get("m.relates_to") or {}).get("rel_type") != "m.replace"
        and c.get("session_id") == sid
    )
