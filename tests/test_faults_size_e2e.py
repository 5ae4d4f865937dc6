"""Size: a request whose prompt or settled edit cannot fit one event is refused at submit (422
too_large); a 413 M_TOO_LARGE from the homeserver is permanent (a short fallback edit is sent);
one record's failing edit never delays another's."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from typing import Any

import pytest

from bot.matrix.txn import txn_id
from tests.support.fault_station import FaultStation, fault_station_fixture
from tests.support.human import content, rel
from tests.support.station import request_body

pytestmark = pytest.mark.e2e


fst = fault_station_fixture("faults-size", "fsz")


def oversized(sid: str, options: int = 20, id_len: int = 190) -> dict[str, Any]:
    """``options`` options of control characters (each 6 bytes in JSON): option ids are never cut, so with
    20 of them no prompt can fit; with 16 of 150 the prompt fits after its cuts."""
    ch = "\x01"
    body = request_body(sid)
    body["options"] = [{"optionId": f"{i:02d}" + ch * id_len, "name": ch * 200, "kind": "allow_once"}
                       for i in range(options)]
    body["toolCall"]["title"] = ch * 5000
    body["toolCall"]["rawInput"] = {"command": ch * 10000}
    return body


async def test_a_request_whose_prompt_cannot_fit_is_refused_at_submit(fst: FaultStation, sid: str) -> None:
    """Refused before anything is stored or posted (the settled edit is checked the same way; it carries no
    more than the prompt now: no options list, no v1 card, the outcome line as its fallback)."""
    await fst.post(request_body(sid))
    assert await fst.prompt_for(sid, timeout=60)  # synced: the room is known to be plain
    code, err = await fst.ahttp("POST", "/permissions", oversized(sid))
    assert code == 422 and err["error"] == "too_large" and "the prompt would take" in err["reason"], err
    _, listed = await fst.ahttp("GET", f"/permissions?session={sid}")
    assert len(listed) == 1  # nothing stored, nothing posted
    # its prompt fits, and so does its lean settled edit (refused before it was lean)
    rec = await fst.post(oversized(sid, options=16, id_len=150))
    for r in (rec, *listed):
        await fst.ahttp("POST", f"/permissions/{r['id']}", {"decision": "deny"})


def _install_id(st: FaultStation) -> str:
    db = sqlite3.connect(f"file:{st.state_dir / 'inbox.sqlite3'}?mode=ro", uri=True, timeout=10)
    try:
        return str(db.execute("SELECT v FROM kv WHERE k='install_id'").fetchone()[0])
    finally:
        db.close()


async def _edit(st: FaultStation, prompt_id: str, timeout: float) -> dict[str, Any] | None:
    return await st.edit_of(prompt_id, timeout=timeout)


async def test_a_413_edit_gets_a_short_fallback_and_a_failing_edit_delays_no_other(
    fst: FaultStation, sid: str
) -> None:
    ids = []
    for i in range(3):
        _, rec = await fst.ahttp("POST", "/permissions", request_body(sid, tool_call_id=f"c{i}"))
        ids.append(rec["id"])
    prompts = []
    for i in range(1, 4):
        p = await fst.prompt_for(sid, seq=i, timeout=60)
        assert p
        prompts.append(p["event_id"])
    install = _install_id(fst)
    too_large, flaky, _fine = ids
    fst.proxy.answer(txn_id("e", install, too_large), 1, 413, {"errcode": "M_TOO_LARGE", "error": "event too large"})
    fst.proxy.drop(txn_id("e", install, flaky), 16)  # back-off grows to several seconds for this one record
    await fst.alice.text("1", reply_to=prompts[0])
    await fst.alice.text("1", reply_to=prompts[1])
    short = await _edit(fst, prompts[0], 30)
    assert short and "too large to repeat" in content(short)["m.new_content"]["body"], short
    assert content(short)["m.new_content"]["resolution"]["option_id"] == "allow_once"
    await asyncio.sleep(3)  # the flaky edit is backing off now
    t0 = time.monotonic()
    await fst.alice.text("2", reply_to=prompts[2])
    assert await _edit(fst, prompts[2], 10), "another record's failing edit held this one up"
    took = time.monotonic() - t0
    assert took < 4, took
    assert await _edit(fst, prompts[1], 60)
    await asyncio.sleep(1)
    edits = [rel(e)["event_id"] for e in fst.alice.events
             if e.get("sender") == fst.bot_id and rel(e).get("rel_type") == "m.replace"]
    assert sorted(edits.count(p) for p in prompts) == [1, 1, 1], edits
    assert fst.daemon and fst.daemon.poll() is None
