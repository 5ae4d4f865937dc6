"""Attacks on plain answers, fake prompts and structured answers (issue 12, points 2 and 7), against
the real Synapse: alice answers, bob may not. Each must now fail to do harm, with a clear refusal."""

from __future__ import annotations

import asyncio
import copy
import sqlite3
from typing import Any

import pytest
from nio import RoomGetStateEventResponse

from bot.answers import ANSWER_KEY, KEYCAPS
from tests.support.human import content, rel
from tests.support.station import Station, request_body

pytestmark = pytest.mark.e2e


async def _mute_bot(station: Station, muted: bool) -> None:
    """While muted the bot can post nothing (power levels): its prompts and edits wait in the outbox."""
    c = station.alice.client
    r = await c.room_get_state_event(station.room_id, "m.room.power_levels")
    assert isinstance(r, RoomGetStateEventResponse), r
    pl = dict(r.content)
    pl["events_default"] = 50 if muted else 0
    pl["events"] = {**pl.get("events", {}), "m.reaction": 50 if muted else 0}
    await c.room_put_state(station.room_id, "m.room.power_levels", pl)


async def test_a_plain_1_racing_a_settle_and_a_new_submission_never_approves_the_new_one(
    station: Station, sid: str
) -> None:
    """`1` sent for A while A is settled through the API and B (`rm -rf`) is submitted: B stays pending."""
    await station.drain()
    a, _pa = await station.submit(request_body(sid))
    await _mute_bot(station, True)  # A's settled edit and B's prompt cannot reach the room yet
    try:
        st, _ = await station.ahttp("POST", f"/permissions/{a['id']}", {"decision": "approve"})
        assert st == 200
        st, b = await station.ahttp(
            "POST", "/permissions", request_body(sid, title="Clean up", command="rm -rf ~", tool_call_id="c2")
        )
        assert st == 201 and b["state"] == "pending"
        mark = station.alice.mark()
        await station.alice.text("1")  # alice sees only A's prompt, still showing pending
        await asyncio.sleep(1.5)  # the daemon handles it now, with B pending in its inbox
        assert (await station.record(b["id"], 0))["state"] == "pending", "B was approved before it was posted"
    finally:
        await _mute_bot(station, False)
    notice = await station.notice_after(mark, timeout=40)
    assert notice, "no notice for the `1`"
    body = content(notice)["body"]
    assert "Already settled: Allow once" in body or "Which request do you mean?" in body, body
    assert await station.prompt_for(sid, seq=b["request_seq"], timeout=40), "B was never posted"
    got = await station.record(b["id"], 1)
    assert got["state"] == "pending", "B was approved by a `1` written before it was posted"
    await station.ahttp("POST", f"/permissions/{b['id']}", {"decision": "deny"})


async def test_a_plain_1_sent_while_nothing_was_pending_approves_nothing_after_a_restart(
    station: Station, sid: str
) -> None:
    """`1` while nothing is pending; a restart that re-reads the room; B submitted: B stays pending."""
    await station.drain()
    x, px = await station.submit(request_body(sid))
    await station.ahttp("POST", f"/permissions/{x['id']}", {"decision": "deny"})
    assert await station.edit_of(px["event_id"])
    station.stop_daemon()
    try:
        await station.alice.text("1")  # nothing is pending
        mark = station.alice.mark()
        await station.alice.text("1", reply_to=px["event_id"])  # its notice shows the `1` was read
    finally:
        station.start_daemon()
        await station.wait_healthy()
    assert await station.notice_after(mark, contains="Already settled"), "the daemon never read the room"
    b, _pb = await station.submit(request_body(sid, title="Clean up", command="rm -rf ~", tool_call_id="c2"))
    # A restart that lost its sync position (a crash before it was saved): the room is read again.
    station.stop_daemon()
    db = sqlite3.connect(station.state_dir / "inbox.sqlite3")
    with db:
        db.execute("DELETE FROM kv WHERE k='matrix.next_batch'")
    db.close()
    mark = station.alice.mark()
    station.start_daemon()
    await station.wait_healthy()
    notice = await station.notice_after(mark, contains="Which request do you mean?")
    assert (await station.record(b["id"], 1))["state"] == "pending", "a `1` older than B approved it"
    assert notice and b["id"] in content(notice)["body"], "the `1` read again got no question"
    await station.ahttp("POST", f"/permissions/{b['id']}", {"decision": "deny"})


async def test_a_fake_prompt_from_a_non_answerer_makes_the_bot_ask(station: Station, sid: str) -> None:
    """bob posts a copy of a prompt after the real one; alice's plain `1` settles nothing."""
    await station.drain()
    rec, prompt = await station.submit(request_body(sid))
    fake = copy.deepcopy(content(prompt))
    fake["request_id"] = "evil:1"
    fake_id = await station.bob.send(fake)
    await station.alice.react(fake_id, KEYCAPS[0])  # a fake prompt is never a prompt: nothing
    await station.alice.text("1", reply_to=fake_id)  # nothing, and no notice
    mark = station.alice.mark()
    await station.alice.text("1")
    notice = await station.notice_after(mark, contains="Which request do you mean?")
    assert (await station.record(rec["id"], 1))["state"] == "pending", "the plain `1` settled the real prompt"
    assert notice and rec["id"] in content(notice)["body"]
    assert not station.alice.find(lambda e: e.get("sender") == station.bot_id
                                  and content(e).get("msgtype") == "m.notice" and e is not notice, start=mark)
    quote = "\n".join(f"> {line}" for line in content(prompt)["body"].split("\n"))
    await station.alice.send({  # a reply as older clients send it, quoting the prompt: still answers it
        "msgtype": "m.text", "body": f"> <{station.bot_id}> {quote[2:]}\n\n1",
        "m.relates_to": {"m.in_reply_to": {"event_id": prompt["event_id"]}}})
    got = await station.record(rec["id"])
    assert got["outcome"]["option_id"] == "allow_once" and got["outcome"]["answered_by"] == station.alice.user_id


async def test_conversation_in_a_prompts_thread_is_not_an_answer(station: Station, sid: str) -> None:
    rec, prompt = await station.submit(request_body(sid))
    mark = station.alice.mark()
    await station.alice.text("1 sec, let me check…", thread=prompt["event_id"])
    await station.alice.text("allow me to look first", reply_to=prompt["event_id"])
    await station.alice.text("2 - ok, the tests are fine", thread=prompt["event_id"])
    got = await station.record(rec["id"])
    assert got["outcome"]["option_id"] == "allow_always"
    assert got["outcome"]["feedback"] == "ok, the tests are fine"
    notices = station.alice.find(lambda e: e.get("sender") == station.bot_id
                                 and content(e).get("msgtype") == "m.notice", start=mark)
    assert notices == [], "conversation got a notice"


async def test_a_structured_answer_must_name_the_prompt_it_replies_to(station: Station, sid: str) -> None:
    a, pa = await station.submit(request_body(sid))
    b, pb = await station.submit(request_body(sid, title="Clean up", command="rm -rf ~", tool_call_id="c2"))
    for_b: dict[str, Any] = {"request_id": b["id"], "option_id": "allow_once",
                             "subject": {"digest": b["digest"], "revision": b["revision"]}}
    mark = station.alice.mark()
    await station.alice.text("Allow once", reply_to=pa["event_id"], extra={ANSWER_KEY: for_b})
    notice = await station.notice_after(mark)
    assert (await station.record(b["id"], 1))["state"] == "pending", "an answer under A's prompt settled B"
    assert notice and b["id"] in content(notice)["body"] and a["id"] in content(notice)["body"]
    mark = station.alice.mark()
    await station.alice.text("Allow once", thread=pa["event_id"], extra={ANSWER_KEY: for_b})
    assert await station.notice_after(mark), "no refusal for a structured answer in another prompt's thread"
    assert (await station.record(a["id"], 1))["state"] == "pending"
    assert (await station.record(b["id"], 1))["state"] == "pending"
    for r, p in ((a, pa), (b, pb)):
        await station.ahttp("POST", f"/permissions/{r['id']}", {"decision": "deny"})
        assert await station.edit_of(p["event_id"])  # the room shows it before the next test posts


async def test_a_plain_answer_in_a_backfilled_gap_binds_by_its_place(station: Station, sid: str) -> None:
    """Written while the daemon was down and followed by enough chatter that the next sync is limited:
    the backfilled `1` still sits right after its prompt, so it answers it."""
    await station.drain()
    rec, _prompt = await station.submit(request_body(sid))
    station.stop_daemon()
    try:
        await station.alice.text("3 - not on main")
        for i in range(25):
            await station.bob.text(f"chatter {i}")
    finally:
        station.start_daemon()
        await station.wait_healthy()
    got = await station.record(rec["id"], 30)
    assert got["state"] == "resolved" and got["outcome"]["option_id"] == "reject_once"
    assert got["outcome"]["feedback"] == "not on main"


def _index(station: Station, pred: Any) -> int | None:
    """Where the first event matching ``pred`` sits in the room as alice's sync delivered it."""
    return next((i for i, e in enumerate(station.alice.events) if pred(e)), None)


def _is_edit_of(station: Station, prompt_id: str) -> Any:
    return lambda e: (e.get("sender") == station.bot_id and rel(e).get("rel_type") == "m.replace"
                      and rel(e).get("event_id") == prompt_id)


async def test_a_prompt_posted_before_the_last_edit_binds_as_the_reader_saw(station: Station, sid: str) -> None:
    """A settled by alice's plain `1`; the agent asks B at once and B is posted before A's edit reaches the
    room (the edit waits for a quiet room). Her `1` under A shows A answered, so B is the only prompt she
    saw pending: her next plain `1` settles B, and both prompts are still edited, once."""
    await station.drain()
    early = False
    for i in range(4):  # B is posted before A's edit unless the machine stalls: try a few rounds
        a, pa = await station.submit(request_body(sid, tool_call_id=f"a{i}"))
        await station.alice.text("1")  # in the room before B's prompt, whenever the bot reads it
        st, b = await station.ahttp(  # the agent asks again at once
            "POST", "/permissions", request_body(sid, title="Clean up", command="rm -rf ~", tool_call_id=f"b{i}")
        )
        assert st == 201
        assert (await station.record(a["id"]))["outcome"]["option_id"] == "allow_once"
        pb = await station.prompt_for(sid, seq=b["request_seq"])
        assert pb
        at_b = _index(station, lambda e, pb=pb: e.get("event_id") == pb["event_id"])
        edit_a = _index(station, _is_edit_of(station, pa["event_id"]))
        early = early or edit_a is None or (at_b is not None and edit_a > at_b)
        await station.alice.text("1")  # she saw A answered (her `1` just under it), and B
        got = await station.record(b["id"])
        assert got["state"] == "resolved" and got["outcome"]["answered_by"] == station.alice.user_id, got
        for p in (pa, pb):
            assert await station.edit_of(p["event_id"]), "a settled prompt was never edited"
        if early:
            break
    assert early, "B was never posted before A's edit: the edit still stands in the way of the next prompt"
    await asyncio.sleep(0.5)
    for p in (pa, pb):
        assert len(station.alice.find(_is_edit_of(station, p["event_id"]))) == 1, "an edit was sent twice"


async def test_a_prompt_settled_out_of_view_is_shown_settled_before_the_next_prompt(
    station: Station, sid: str
) -> None:
    """An answer in A's thread (the main timeline shows only a summary) marks nothing: A's edit goes before
    B's prompt, so alice's plain `1` under B is B's."""
    await station.drain()
    a, pa = await station.submit(request_body(sid))
    await station.alice.text("1", thread=pa["event_id"])
    assert (await station.record(a["id"]))["state"] == "resolved"
    b, pb = await station.submit(request_body(sid, title="Clean up", command="rm -rf ~", tool_call_id="c2"))
    edit_a = _index(station, _is_edit_of(station, pa["event_id"]))
    at_b = _index(station, lambda e: e.get("event_id") == pb["event_id"])
    assert edit_a is not None and at_b is not None and edit_a < at_b, "B was posted before A showed settled"
    await station.alice.text("1")
    got = await station.record(b["id"])
    assert got["state"] == "resolved" and got["outcome"]["answered_by"] == station.alice.user_id


async def test_an_agent_cancel_racing_its_next_prompt_never_lends_it_a_plain_answer(
    station: Station, sid: str
) -> None:
    """The agent withdraws A and asks B (`rm -rf`) at once, while A's edit cannot reach the room: nothing in
    the room shows A settled until its edit, so a plain `1` under B settles B only if A's edit is above B;
    otherwise the bot asks."""
    await station.drain()
    a, pa = await station.submit(request_body(sid))
    await _mute_bot(station, True)
    try:
        st, _ = await station.ahttp("POST", f"/permissions/{a['id']}", {"decision": "cancel"})
        assert st == 200
        st, b = await station.ahttp(
            "POST", "/permissions", request_body(sid, title="Clean up", command="rm -rf ~", tool_call_id="c2")
        )
        assert st == 201
    finally:
        await _mute_bot(station, False)
    pb = await station.prompt_for(sid, seq=b["request_seq"], timeout=40)
    assert pb, "B was never posted"
    mark = station.alice.mark()
    await station.alice.text("1")  # what alice saw above it decides
    await asyncio.sleep(1.0)
    edit_a = _index(station, _is_edit_of(station, pa["event_id"]))
    at_b = _index(station, lambda e: e.get("event_id") == pb["event_id"])
    assert at_b is not None
    got = await station.record(b["id"], 1)
    if edit_a is not None and edit_a < at_b:  # she saw A settled: B was the only one pending
        assert got["state"] == "resolved" and got["outcome"]["answered_by"] == station.alice.user_id, got
    else:
        assert got["state"] == "pending", "a plain `1` settled B while A still showed pending above it"
        assert await station.notice_after(mark, contains="Which request do you mean?")
        await station.ahttp("POST", f"/permissions/{b['id']}", {"decision": "deny"})


@pytest.mark.parametrize("how", ["redact", "edit"])
async def test_an_answer_taken_back_makes_its_prompt_look_pending_again(station: Station, sid: str, how: str) -> None:
    """alice's `1` settled A and B was posted at once (A's edit still waiting); then she redacts her `1` (or
    edits it into "never mind"): the room shows A pending again (no answer, maybe no edit yet) beside B, so
    her next plain `1` must not be taken to B: the bot asks."""
    await station.drain()
    a, pa = await station.submit(request_body(sid))
    one = await station.alice.text("1")
    st, b = await station.ahttp(
        "POST", "/permissions", request_body(sid, title="Clean up", command="rm -rf ~", tool_call_id="c2")
    )
    assert st == 201
    assert (await station.record(a["id"]))["state"] == "resolved"
    assert await station.prompt_for(sid, seq=b["request_seq"]), "B was never posted"
    if how == "redact":
        r = await station.alice.client.room_redact(station.room_id, one, reason="wrong prompt")
        assert hasattr(r, "event_id"), r
    else:
        await station.alice.send({"msgtype": "m.text", "body": "* never mind",
                                  "m.new_content": {"msgtype": "m.text", "body": "never mind"},
                                  "m.relates_to": {"rel_type": "m.replace", "event_id": one}})
    await asyncio.sleep(0.5)  # the bot reads it before her next `1`, as she saw it
    mark = station.alice.mark()
    await station.alice.text("1")
    notice = await station.notice_after(mark, contains="Which request do you mean?")
    assert (await station.record(b["id"], 1))["state"] == "pending", "a plain `1` settled B after A's answer went"
    assert notice and b["id"] in content(notice)["body"]
    assert await station.edit_of(pa["event_id"]), "A was never edited"
    await station.ahttp("POST", f"/permissions/{b['id']}", {"decision": "deny"})
