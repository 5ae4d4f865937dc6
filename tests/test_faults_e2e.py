"""Faults survived: kill -9 mid-flight, the homeserver restarted mid-flight. Afterwards every
request settles exactly once and the room shows each prompt (and each settled edit) once."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from tests.support.human import content, rel
from tests.support.station import Station, request_body

pytestmark = pytest.mark.e2e


async def _answer_all_and_check(station: Station, sid: str, ids: list[str]) -> None:
    prompts = {}
    for i, rid in enumerate(ids, start=1):
        p = await station.prompt_for(sid, seq=i, timeout=60)
        assert p, f"prompt for {rid} missing"
        prompts[rid] = p["event_id"]
    for rid in ids:
        await station.alice.text("1", reply_to=prompts[rid])
    for rid in ids:
        _, rec = await station.ahttp("GET", f"/permissions/{rid}?wait=30")
        assert rec["state"] == "resolved" and rec["outcome"]["option_id"] == "allow_once", rec
    wanted = set(prompts.values())

    def edits() -> Counter[str]:
        return Counter(rel(e)["event_id"] for e in station.alice.events if e.get("sender") == station.bot_id
                       and rel(e).get("rel_type") == "m.replace" and rel(e).get("event_id") in wanted)

    # Every settled prompt is edited (none lost): wait for the room to show them all, then a little
    # longer so that a second edit or a second prompt would be seen too.
    for _ in range(300):
        if set(edits()) == wanted:
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(2)
    posted = Counter(content(e)["request_id"] for e in station.alice.events
                     if station.is_prompt(e) and content(e).get("session_id") == sid)
    assert set(posted) == set(ids) and set(posted.values()) == {1}, posted
    got = edits()
    assert set(got) == wanted and set(got.values()) == {1}, got


async def test_kill_9_mid_flight_with_50_pending(station: Station, sid: str) -> None:
    ids = []
    for i in range(50):
        rec = await station.post(request_body(sid, tool_call_id=f"c{i}"))
        ids.append(rec["id"])
    station.kill_daemon()  # posting is under way
    station.start_daemon()
    await station.wait_healthy()
    _, pending = await station.ahttp("GET", f"/permissions?session={sid}")
    assert [r["id"] for r in pending] == ids
    await _answer_all_and_check(station, sid, ids)


async def test_homeserver_restarted_mid_flight(station: Station, sid: str) -> None:
    ids = []
    for i in range(20):
        _st, rec = await station.ahttp("POST", "/permissions", request_body(sid, tool_call_id=f"c{i}"))
        ids.append(rec["id"])
    station.hs.stop()
    await asyncio.sleep(3)
    station.hs.start()
    await _answer_all_and_check(station, sid, ids)


async def test_crash_between_posting_and_recording_loses_no_answer(station: Station, sid: str) -> None:
    """The prompt reached the room but the daemon died before storing its event id; the answer
    given meanwhile still applies, and the re-post (same txn id) shows no second prompt."""
    import sqlite3

    _, rec = await station.ahttp("POST", "/permissions", request_body(sid))
    prompt = await station.prompt_for(sid)
    assert prompt
    station.kill_daemon()
    db = sqlite3.connect(station.state_dir / "inbox.sqlite3")
    db.execute("UPDATE requests SET prompt_event_id=NULL, seeded=0 WHERE id=?", (rec["id"],))
    db.commit()
    db.close()
    await station.alice.text("2", reply_to=prompt["event_id"])
    station.start_daemon()
    await station.wait_healthy()
    _, got = await station.ahttp("GET", f"/permissions/{rec['id']}?wait=20")
    assert got["state"] == "resolved" and got["outcome"]["option_id"] == "allow_always", got
    assert got["prompt_event_id"] == prompt["event_id"]
    await asyncio.sleep(1)
    assert len([e for e in station.alice.events
                if station.is_prompt(e) and content(e).get("session_id") == sid]) == 1


async def test_proxy_killed_mid_flight(station: Station, sid: str, tmp_path) -> None:
    """kill -9 of `permission-bot acp` while its request is pending: the request is still answered
    in the room exactly once, and the next proxy works as if nothing happened."""
    import os
    import signal
    from pathlib import Path

    from tests.agents.session import ClientRun, script

    flags = ["--url", station.api_url, "--token", station.token]
    run = await ClientRun.start([script(title="Survive a dead proxy")], flags, tmp_path)
    session_id = await run.session_id()
    prompt = await station.prompt_for(session_id)
    assert prompt
    children = Path(f"/proc/{run.proc.pid}/task/{run.proc.pid}/children").read_text().split()
    proxy_pid = next(int(p) for p in children
                     if "acp" in Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace"))
    os.kill(proxy_pid, signal.SIGKILL)
    await station.alice.text("1", reply_to=prompt["event_id"])
    rid = content(prompt)["request_id"]
    _, rec = await station.ahttp("GET", f"/permissions/{rid}?wait=20")
    assert rec["state"] == "resolved" and rec["outcome"]["option_id"] == "allow_once"
    assert await station.edit_of(prompt["event_id"])
    await run.close()
    again = await ClientRun.start([script(title="After the dead proxy")], flags, tmp_path)
    try:
        sid2 = await again.session_id()
        p2 = await station.prompt_for(sid2)
        assert p2
        await station.alice.text("2", reply_to=p2["event_id"])
        o = await again.outcome()
        assert o["outcome"] == "selected" and o["optionId"] == "allow_always"
    finally:
        await again.close()
    await asyncio.sleep(1)
    assert len([e for e in station.alice.events if station.is_prompt(e)
                and content(e).get("session_id") == session_id]) == 1
