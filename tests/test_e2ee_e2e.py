"""Encrypted station rooms (real Synapse): the bot posts encrypted prompts, reads encrypted answers,
keeps its device across restarts, waits for late room keys, and applies its trust policy."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.answers import KEYCAPS
from bot.demo.homeserver import Homeserver
from bot.events import validate_content
from bot.matrix.crypto import Waiting, fingerprint, is_targeted, plain_event
from tests.support.e2e_human import E2EStation
from tests.support.human import content, rel
from tests.support.station import request_body

e2e = pytest.mark.e2e


@pytest.fixture(scope="module")
async def e2ee(homeserver: Homeserver, workdir: Path) -> AsyncIterator[E2EStation]:
    st = E2EStation(homeserver, workdir / "e2ee", "e2ee", matrix_extra='undecryptable_wait = "3s"')
    await st.setup()
    yield st
    await st.teardown()


async def _wire(st: E2EStation, event_id: str) -> dict[str, Any] | None:
    """The event as carol's plain client received it (what went over the wire), waiting for her sync."""
    return await st.carol.wait(lambda e: e.get("event_id") == event_id, 10)


# -- pure helpers (no homeserver) -------------------------------------------------


def test_plain_event_takes_the_wrappers_fields_and_its_cleartext_relation() -> None:
    wrapper = {
        "type": "m.room.encrypted", "event_id": "$e", "sender": "@a:hs", "origin_server_ts": 5, "room_id": "!r:hs",
        "content": {"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "x",
                    "m.relates_to": {"m.in_reply_to": {"event_id": "$p"}}},
        "unsigned": {"age": 3},
    }
    dec = {"type": "m.room.message", "room_id": "!r:hs", "content": {"msgtype": "m.text", "body": "2"}}
    out = plain_event(dec, wrapper)
    assert out["type"] == "m.room.message" and out["event_id"] == "$e" and out["sender"] == "@a:hs"
    assert out["origin_server_ts"] == 5 and out["unsigned"] == {"age": 3}
    assert out["content"]["m.relates_to"] == {"m.in_reply_to": {"event_id": "$p"}}
    assert "m.relates_to" not in dec["content"]  # the input is not changed
    own = {"type": "m.reaction",
           "content": {"m.relates_to": {"rel_type": "m.annotation", "event_id": "$q", "key": "1"}}}
    assert plain_event(own, wrapper)["content"]["m.relates_to"]["event_id"] == "$q"  # the decrypted one wins


def test_targeted_waiting_and_fingerprint() -> None:
    assert is_targeted({"content": {"m.relates_to": {"m.in_reply_to": {"event_id": "$p"}}}})
    assert is_targeted({"content": {"dev.agentpod.permission.answer": {}}})
    assert not is_targeted({"content": {"body": "1"}})
    w = Waiting(source={"event_id": "$e", "sender": "@a:hs", "content": {"session_id": "s"}}, since=1.5, told=True)
    back = Waiting.from_json(w.to_json())
    assert back == w and back.session_id == "s"
    assert Waiting.from_json({"source": {}, "since": 1}) is None
    assert fingerprint("abcdefgh") == "abcd efgh" and fingerprint(None) is None


# -- against Synapse ---------------------------------------------------------------------


@e2e
async def test_prompt_is_encrypted_on_the_wire_and_valid_when_decrypted(e2ee: E2EStation, sid: str) -> None:
    rec, prompt = await e2ee.submit(request_body(sid))
    validate_content(content(prompt))
    assert content(prompt)["request_id"] == rec["id"]
    wire = await _wire(e2ee, prompt["event_id"])
    assert wire and wire["type"] == "m.room.encrypted" and "ciphertext" in content(wire)
    assert await e2ee.prompt_for(sid, human=e2ee.bob), "bob's device (tofu) did not get the room key"
    seed = await e2ee.alice.wait(
        lambda e: e.get("type") == "m.reaction" and e.get("sender") == e2ee.bot_id
        and rel(e).get("event_id") == prompt["event_id"], 20)
    assert seed, "no decrypted seed reaction"
    wire = await _wire(e2ee, seed["event_id"])
    assert wire and wire["type"] == "m.room.encrypted"
    assert rel(wire).get("rel_type") == "m.annotation"  # the relation stays in the clear
    st, _ = await e2ee.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "deny"})
    assert st == 200
    edit = await e2ee.edit_of(prompt["event_id"])
    assert edit
    wire = await _wire(e2ee, edit["event_id"])
    assert wire and wire["type"] == "m.room.encrypted"


@e2e
async def test_encrypted_reply_by_number_resolves(e2ee: E2EStation, sid: str) -> None:
    rec, prompt = await e2ee.submit(request_body(sid))
    ev = await e2ee.alice.text("2", reply_to=prompt["event_id"])
    assert (await _wire(e2ee, ev) or {}).get("type") == "m.room.encrypted"
    got = await e2ee.record(rec["id"], wait=20)
    assert got["state"] == "resolved" and got["outcome"]["option_id"] == "allow_always"
    assert got["outcome"]["via"] == "matrix" and got["outcome"]["answered_by"] == e2ee.alice.user_id
    edit = await e2ee.edit_of(prompt["event_id"])
    assert edit and content(edit)["m.new_content"]["resolution"]["answered_by"] == e2ee.alice.user_id


@e2e
async def test_encrypted_reaction_resolves(e2ee: E2EStation, sid: str) -> None:
    rec, prompt = await e2ee.submit(request_body(sid))
    ev = await e2ee.alice.react(prompt["event_id"], KEYCAPS[2])
    assert (await _wire(e2ee, ev) or {}).get("type") == "m.room.encrypted"
    got = await e2ee.record(rec["id"], wait=20)
    assert got["outcome"]["option_id"] == "reject_once" and got["outcome"]["via"] == "reaction"


@e2e
async def test_encrypted_structured_answer_resolves(e2ee: E2EStation, sid: str) -> None:
    rec, _prompt = await e2ee.submit(request_body(sid))
    answer = {"request_id": rec["id"], "option_id": "reject_always",
              "subject": {"digest": rec["digest"], "revision": rec["revision"]}, "feedback": "not in prod"}
    await e2ee.alice.text("(structured)", extra={"dev.agentpod.permission.answer": answer})
    got = await e2ee.record(rec["id"], wait=20)
    assert got["outcome"]["option_id"] == "reject_always" and got["outcome"]["via"] == "structured"
    assert got["outcome"]["feedback"] == "not in prod"


@e2e
async def test_late_room_key_is_requested_and_the_answer_then_counts(e2ee: E2EStation, sid: str) -> None:
    rec, prompt = await e2ee.submit(request_body(sid))
    c = {"msgtype": "m.text", "body": "1", "m.relates_to": {"m.in_reply_to": {"event_id": prompt["event_id"]}}}
    _ev, session_id, exported = await e2ee.alice.send_undecryptable(c)
    for _ in range(150):  # the bot asks the sender's device for the key
        if e2ee.alice.key_requests(session_id, e2ee.bot_id):
            break
        await asyncio.sleep(0.1)
    req = e2ee.alice.key_requests(session_id, e2ee.bot_id)
    assert req, "the bot did not request the room key from the sender's device"
    assert content(req[0])["requesting_device_id"] == e2ee.kv("matrix.session")["device_id"]
    assert (await e2ee.record(rec["id"], wait=1))["state"] == "pending"  # not handled while undecryptable
    device = e2ee.kv("matrix.session")["device_id"]
    await e2ee.alice.forward_key(e2ee.bot_id, device, session_id, exported)
    got = await e2ee.record(rec["id"], wait=20)
    assert got["state"] == "resolved" and got["outcome"]["option_id"] == "allow_once"
    assert got["outcome"]["answered_by"] == e2ee.alice.user_id


@e2e
async def test_undecryptable_answer_gets_one_resend_notice(e2ee: E2EStation, sid: str) -> None:
    rec, prompt = await e2ee.submit(request_body(sid))
    mark = e2ee.alice.mark()
    c = {"msgtype": "m.text", "body": "1", "m.relates_to": {"m.in_reply_to": {"event_id": prompt["event_id"]}}}
    ev, _sess, _key = await e2ee.alice.send_undecryptable(c)
    ev2, _sess2, _key2 = await e2ee.alice.send_undecryptable({"msgtype": "m.text", "body": "3"})  # another session
    notice = await e2ee.alice.wait(
        lambda e: e.get("sender") == e2ee.bot_id and content(e).get("msgtype") == "m.notice"
        and rel(e).get("m.in_reply_to", {}).get("event_id") == ev, 20, start=mark)
    assert notice, "no notice asking to resend"
    assert "send it again" in content(notice)["body"] and e2ee.alice.user_id in content(notice)["body"]
    assert (await e2ee.record(rec["id"], wait=1))["state"] == "pending"
    await e2ee.alice.text("4", reply_to=prompt["event_id"])  # resent, readable this time
    got = await e2ee.record(rec["id"], wait=20)
    assert got["outcome"]["option_id"] == "reject_always"
    await asyncio.sleep(4)  # past undecryptable_wait again: still one notice per event
    for asked in (ev, ev2):  # one notice per event (per Megolm session), never repeated
        notices = e2ee.alice.find(lambda e, a=asked: e.get("sender") == e2ee.bot_id
                                  and "send it again" in content(e).get("body", "")
                                  and rel(e).get("m.in_reply_to", {}).get("event_id") == a, start=mark)
        assert len(notices) == 1


@e2e
async def test_restart_keeps_the_device_and_still_decrypts(e2ee: E2EStation, sid: str) -> None:
    before = e2ee.kv("matrix.session")["device_id"]
    crypto = e2ee.kv("matrix.crypto")
    assert crypto["device_id"] == before and len(crypto["ed25519"]) == 43
    devices = e2ee.bot_devices()  # the bot's login device (and the one registration left)
    assert before in devices
    rec, prompt = await e2ee.submit(request_body(sid))
    await e2ee.alice.text("1", reply_to=prompt["event_id"])
    assert (await e2ee.record(rec["id"], wait=20))["outcome"]["option_id"] == "allow_once"
    olm = e2ee.alice.client.olm
    assert olm is not None
    alices_session = olm.outbound_group_sessions[e2ee.room_id].id
    await e2ee.restart_daemon()
    assert e2ee.kv("matrix.session")["device_id"] == before
    assert e2ee.kv("matrix.crypto") == crypto  # the same identity keys: the Olm account was kept
    assert e2ee.bot_devices() == devices  # no new device
    rec2, prompt2 = await e2ee.submit(request_body(sid))  # a new Megolm session from the same device
    validate_content(content(prompt2))
    await e2ee.alice.text("3", reply_to=prompt2["event_id"])  # alice's session from before the restart
    got = await e2ee.record(rec2["id"], wait=20)
    assert got["state"] == "resolved" and got["outcome"]["option_id"] == "reject_once"
    assert olm.outbound_group_sessions[e2ee.room_id].id == alices_session  # read with the key kept on disk
    assert "matrix_logged_in" not in e2ee.log_text().split("matrix_session_restored")[-1]


@e2e
async def test_verified_only_shares_with_listed_devices_and_ignores_others(e2ee: E2EStation, sid: str) -> None:
    a = e2ee.alice
    pin = f'[{{ user_id = "{a.user_id}", device_id = "{a.device_id}", ed25519 = "{fingerprint(a.ed25519)}" }}]'
    e2ee.config_path.write_text(e2ee.config_text(trust='"verified-only"', verified_devices=pin))
    await e2ee.restart_daemon()
    try:
        rec, prompt = await e2ee.submit(request_body(sid))
        seen = await e2ee.bob.wait(lambda e: e.get("event_id") == prompt["event_id"], 10)
        assert seen and seen["type"] == "m.room.encrypted", "bob's unlisted device could read the prompt"
        mark = e2ee.alice.mark()
        await e2ee.bob.text("1", reply_to=prompt["event_id"])  # bob may answer, but not from this device
        told = await e2ee.notice_after(mark, contains="verified devices")
        assert told and e2ee.bob.user_id in content(told)["body"]
        assert (await e2ee.record(rec["id"], wait=1))["state"] == "pending"
        await e2ee.alice.text("2", reply_to=prompt["event_id"])
        got = await e2ee.record(rec["id"], wait=20)
        assert got["outcome"]["option_id"] == "allow_always" and got["outcome"]["answered_by"] == e2ee.alice.user_id
    finally:
        e2ee.write_config()
        await e2ee.restart_daemon()
    rec, _prompt = await e2ee.submit(request_body(sid), human=e2ee.bob)  # tofu again: bob's device gets the keys back
    await e2ee.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "deny"})


@e2e
async def test_encryption_off_refuses_the_encrypted_room(homeserver: Homeserver, workdir: Path, sid: str) -> None:
    st = E2EStation(homeserver, workdir / "e2ee-off", "e2eeoff", encryption=False)
    await st.setup()
    try:
        notice = await st.alice.wait(
            lambda e: e.get("sender") == st.bot_id and content(e).get("msgtype") == "m.notice"
            and "cannot read encrypted messages" in content(e).get("body", ""), 20)
        assert notice and notice["type"] == "m.room.message"  # a plaintext notice: everyone can read it
        assert "station_room_encrypted_refused" in st.log_text()
        rec = await st.post(request_body(sid))
        assert await st.prompt_for(sid, timeout=3) is None  # nothing is posted into the room
        code, got = await st.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "approve"})
        assert code == 200 and got["state"] == "resolved"  # the API still answers
        await st.restart_daemon()
        assert st.daemon is not None and st.daemon.poll() is None
        await asyncio.sleep(2)
        refusals = st.alice.find(lambda e: e.get("sender") == st.bot_id
                                 and "cannot read encrypted messages" in content(e).get("body", ""))
        assert len(refusals) == 1
    finally:
        await st.teardown()
