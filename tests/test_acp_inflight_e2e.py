"""A permission request whose POST is in flight when the proxy is stopped, against the real daemon and
Synapse: the link (tests/support/faultproxy.py) holds the first submission for seconds, the proxy is
SIGTERMed meanwhile. The request must end cancelled with its prompt edited to show it, also once the
held POST reaches the daemon late: no live prompt that nobody's agent waits for."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agents.raw import RawRun, permission_line
from tests.support.faultproxy import FaultProxy
from tests.support.human import content
from tests.support.station import AGENT_B_TOKEN, AGENT_TOKEN, request_body

pytestmark = pytest.mark.e2e
HOLD = 6.0  # seconds the first submission is held on its way to the daemon


@pytest.fixture
def slow_link(station: Any) -> Iterator[FaultProxy]:
    fp = FaultProxy("127.0.0.1", station.api_port)
    fp.hold("POST /permissions HTTP", HOLD, 1)
    fp.start()
    yield fp
    fp.stop()


async def _until(pred: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"no {what} within {timeout}s"
        await asyncio.sleep(0.05)


async def _record(station: Any, rid: str, timeout: float = 10) -> dict[str, Any]:
    """The record once the daemon has it (the late POST may take a moment to be handled)."""
    deadline = time.monotonic() + timeout
    while True:
        st, rec = await station.ahttp("GET", f"/permissions/{rid}")
        if st == 200:
            return dict(rec)
        assert st == 404 and time.monotonic() < deadline, (st, rec)
        await asyncio.sleep(0.1)


async def test_sigterm_with_the_post_in_flight_leaves_no_live_prompt(
    station: Any, slow_link: FaultProxy, tmp_path: Path, sid: str
) -> None:
    r = await RawRun.start(["--url", slow_link.url, "--token", AGENT_TOKEN[1]], tmp_path, station.exe)
    try:
        await r.agent_sends(permission_line(1, sid, title="Held on the way"))
        await _until(lambda: slow_link.held == 1, 30, "held submission")
        t0 = time.monotonic()
        r.proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(r.proc.wait(), 20)
        took = time.monotonic() - t0
    finally:
        await r.close()
    assert took < 6, took
    # the held POST reaches the daemon late: it must find the key, and nothing new is made or posted
    await _until(lambda: slow_link.released == 1, HOLD + 10, "the held submission forwarded")
    rec = await _record(station, f"{sid}:1")
    assert rec["state"] == "cancelled" and rec["outcome"]["option_id"] is None, rec
    assert rec["outcome"]["answered_by"] == f"api:{AGENT_TOKEN[0]}"  # the agent token cancelled its own
    assert "in_flight_request_not_cancelled" not in r.stderr()
    st, _ = await station.ahttp("GET", f"/permissions/{sid}:2")
    assert st == 404
    _, pending = await station.ahttp("GET", f"/permissions?session={sid}")
    assert pending == []
    p = await station.prompt_for(sid, timeout=5)
    if p is not None:  # posted before the cancel (a race with the poster): edited to show it
        edit = await station.edit_of(p["event_id"])
        assert edit, "the prompt of the cancelled request was never edited"
        assert "ancel" in content(edit)["m.new_content"]["body"]
    prompts = [e for e in station.alice.events if station.is_prompt(e) and content(e).get("session_id") == sid]
    assert len(prompts) <= 1, prompts
    print(f"\nmeasured: proxy exit after SIGTERM with its POST held: {took * 1000:.0f} ms")


async def test_another_agent_token_sending_the_same_body_may_not_cancel_the_request(station: Any, sid: str) -> None:
    """The re-POST learns the record of a (session, key) whoever submitted it; the cancel is refused
    to any other agent token, so the mechanism gives an agent no power over requests it did not submit."""
    body = request_body(sid, title="Agent A's", key="k-1")
    rec = await station.post(body, token=AGENT_TOKEN[1])
    st, again = await station.ahttp("POST", "/permissions", body, token=AGENT_B_TOKEN[1])
    assert st == 200 and again["id"] == rec["id"]
    cancel = {"decision": "cancel", "key": "k-1"}
    st, err = await station.ahttp("POST", f"/permissions/{rec['id']}", cancel, token=AGENT_B_TOKEN[1])
    assert st == 403 and "only the requests it submitted" in err["reason"], err
    assert (await station.record(rec["id"], wait=0))["state"] == "pending"
    st, _ = await station.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "cancel"}, token=AGENT_TOKEN[1])
    assert st == 404  # an agent's cancel carries the request's key
    st, _ = await station.ahttp("POST", f"/permissions/{rec['id']}", cancel, token=AGENT_TOKEN[1])
    assert st == 200
