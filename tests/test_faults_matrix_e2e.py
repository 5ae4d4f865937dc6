"""Faults on the Matrix side, through a TCP proxy of the tests' own (tests/support/faultproxy.py):
dropped /messages during a backfill, a dead link, a revoked token, a stop while the homeserver is
unreachable, and the bot kicked from its room. The daemon stays up (or stops with the documented
line), /healthz says what is true, and afterwards every request is settled exactly once."""

from __future__ import annotations

import asyncio
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from bot.demo.homeserver import http
from tests.support.fault_station import FaultStation, fault_station_fixture
from tests.support.human import content, rel
from tests.support.station import request_body

pytestmark = pytest.mark.e2e


fst = fault_station_fixture("faults", "flt")


async def _health_until(
    st: FaultStation, pred: Callable[[dict[str, Any]], bool], timeout: float = 40
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            code, body = await st.ahttp("GET", "/healthz", timeout=5)
        except OSError:  # not listening yet
            code = 0
        if code == 200 and pred(body):
            return body
        await asyncio.sleep(0.3)
    raise AssertionError(f"/healthz never got there: {body}")


async def _submit(st: FaultStation, sid: str, n: int) -> list[str]:
    return [(await st.post(request_body(sid, tool_call_id=f"c{i}")))["id"] for i in range(n)]


async def _settled_once(st: FaultStation, sid: str, ids: list[str], option: str = "allow_once") -> None:
    """Every request resolved with ``option``; the room shows each prompt once and its settled edit once."""
    prompts = set()
    for rid in ids:
        rec = await st.record(rid, 60)
        assert rec["state"] == "resolved" and rec["outcome"]["option_id"] == option, rec
        prompts.add(rec["prompt_event_id"])
    for p in prompts:
        assert await st.edit_of(p, timeout=30), f"no settled edit of {p}"
    await asyncio.sleep(1)
    evs = st.alice.events
    posted = Counter(content(e)["request_id"] for e in evs if st.is_prompt(e) and content(e).get("session_id") == sid)
    assert set(posted) == set(ids) and set(posted.values()) == {1}, posted
    edits = Counter(rel(e)["event_id"] for e in evs if e.get("sender") == st.bot_id
                    and rel(e).get("rel_type") == "m.replace" and rel(e).get("event_id") in prompts)
    assert set(edits) == prompts and set(edits.values()) == {1}, edits


async def _answer(st: FaultStation, sid: str, ids: list[str], body: str = "1") -> None:
    for rid in ids:
        seq = int(rid.rsplit(":", 1)[1])
        p = await st.prompt_for(sid, seq=seq, timeout=60)
        assert p, f"prompt {rid} never posted"
        await st.alice.text(body, reply_to=p["event_id"])


async def test_backfill_dropped_24_times_is_retried_and_the_answer_in_the_gap_counts(
    fst: FaultStation, sid: str
) -> None:
    """The issue's crash: 25 messages while stopped, then every /messages request of the backfill
    dropped 24 times (more than one batch's attempts). The daemon stays up and the answer that
    only the backfill carries settles its request, once."""
    [rid] = await _submit(fst, sid, 1)
    prompt = await fst.prompt_for(sid, timeout=60)
    assert prompt
    fst.stop_daemon()
    assert fst.daemon and fst.daemon.returncode == 0
    await fst.alice.text("1", reply_to=prompt["event_id"])
    for i in range(25):
        await fst.alice.text(f"chatter {i}")
    fst.proxy.drop("/messages", 24)
    fst.start_daemon()
    await fst.wait_healthy()
    rec = await fst.record(rid, 90)
    assert rec["state"] == "resolved" and rec["outcome"]["answered_by"] == fst.alice.user_id, rec
    assert fst.proxy.pending_drops() == 0
    assert fst.daemon.poll() is None, "the daemon died on a flaky link"
    log = fst.log_text()
    assert "sync_batch_failed" in log and "timeline_backfilled" in log, log[-3000:]
    await _settled_once(fst, sid, [rid])
    await _health_until(fst, lambda b: b["status"] == "ok")


async def test_a_dead_link_reads_degraded_then_every_request_settles_once(fst: FaultStation, sid: str) -> None:
    ids = await _submit(fst, sid, 3)
    await _answer(fst, sid, ids[:1])
    fst.proxy.mode = "stall"
    fst.proxy.cut()
    t0 = time.monotonic()
    body = await _health_until(fst, lambda b: b["status"] == "degraded")
    assert any("not synced" in r for r in body["reasons"]), body
    assert body["matrix_ready"] is True and time.monotonic() - t0 < 30
    assert (await fst.record(ids[1], wait=None))["state"] == "pending"  # the API keeps answering meanwhile
    fst.proxy.mode = "pass"
    fst.proxy.cut()
    await _answer(fst, sid, ids[1:])
    await _settled_once(fst, sid, ids)
    await _health_until(fst, lambda b: b["status"] == "ok")
    assert fst.daemon and fst.daemon.poll() is None


async def test_kicked_bot_reads_degraded_and_recovers_when_invited_back(fst: FaultStation, sid: str) -> None:
    rid_q = urllib.parse.quote(fst.room_id)
    base = f"{fst.hs.url}/_matrix/client/v3/rooms/{rid_q}"
    http("POST", f"{base}/kick", {"user_id": fst.bot_id, "reason": "fault test"}, fst.alice.token)
    body = await _health_until(fst, lambda b: any("not in the station room" in r for r in b["reasons"]))
    assert body["status"] == "degraded"
    ids = await _submit(fst, sid, 1)
    body = await _health_until(fst, lambda b: any(r.startswith("sends failing") for r in b["reasons"]))
    assert "M_FORBIDDEN" in " ".join(body["reasons"]), body
    http("POST", f"{base}/invite", {"user_id": fst.bot_id}, fst.alice.token)
    await _answer(fst, sid, ids)
    await _settled_once(fst, sid, ids)
    await _health_until(fst, lambda b: b["status"] == "ok")


async def test_revoked_token_logs_in_again_with_a_password_keeping_the_inbox(fst: FaultStation, sid: str) -> None:
    ids = await _submit(fst, sid, 2)
    await fst.prompt_for(sid, seq=2, timeout=60)
    old = fst.kv("matrix.session")
    http("POST", f"{fst.hs.url}/_matrix/client/v3/logout", {}, old["access_token"])
    deadline = time.monotonic() + 60
    while fst.kv("matrix.session")["device_id"] == old["device_id"]:
        assert time.monotonic() < deadline, "no new login after the token was revoked"
        await asyncio.sleep(0.3)
    assert "matrix_token_revoked" in fst.log_text()
    await _answer(fst, sid, ids, body="2")
    await _settled_once(fst, sid, ids, option="allow_always")
    assert fst.daemon and fst.daemon.poll() is None


async def test_revoked_token_without_a_password_stops_with_one_line_and_code_1(fst: FaultStation) -> None:
    """Nothing can heal it: one clear line, exit 1, never "stopped code=0"; with the password back
    the saved (revoked) session is replaced by a new login at start."""
    fst.stop_daemon()
    fst.password = False
    fst.write_config()
    start = len(fst.log_text())
    fst.start_daemon()
    try:
        await fst.wait_healthy()
        token = fst.kv("matrix.session")["access_token"]
        http("POST", f"{fst.hs.url}/_matrix/client/v3/logout", {}, token)
        assert fst.daemon
        code = await asyncio.to_thread(fst.daemon.wait, 60)
        assert code == 1
        tail = fst.log_text()[start:]
        fatal = [line for line in tail.splitlines() if "matrix_fatal" in line]
        assert len(fatal) == 1 and "no matrix.password" in fatal[0], tail[-1500:]
        assert "stopped" in tail and "code=1" in tail and "code=0" not in tail
    finally:
        fst.password = True
        fst.write_config()
    fst.start_daemon()
    await fst.wait_healthy()
    assert "matrix_token_revoked" in fst.log_text()[start:]


async def test_sigterm_while_the_homeserver_is_unreachable_at_start(fst: FaultStation) -> None:
    """`docker stop` must not need SIGKILL: a stop while login waits on a stalled or refusing link."""
    for mode in ("stall", "reset"):
        fst.stop_daemon()
        fst.proxy.mode = mode
        fst.start_daemon()
        try:
            body = await _health_until(fst, lambda b: True, timeout=30)
            assert body["status"] == "degraded" and body["matrix_ready"] is False, body
            await asyncio.sleep(2)
            assert fst.daemon
            t0 = time.monotonic()
            fst.daemon.terminate()
            code = await asyncio.to_thread(fst.daemon.wait, 15)
            took = time.monotonic() - t0
            print(f"\nmeasured: SIGTERM with the homeserver link in {mode!r}: exit {code} in {took:.2f} s")
            assert code == 0 and took < 10, mode
        finally:
            fst.proxy.mode = "pass"
            fst.proxy.cut()
    fst.start_daemon()
    await fst.wait_healthy()
