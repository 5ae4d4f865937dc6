"""Many station rooms (issue 26) against the real Synapse: requests routed by credential, each prompt
answered only in its own room by that room's answerers, deciders limited to their rooms, invites, restart.

One daemon for the module: the default room (alice answers) and ``infra`` (dave answers; alice is a
member there, no answerer). Every cross-room attempt is an attack that must settle nothing.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.demo.homeserver import Homeserver
from tests.support.human import Human, content
from tests.support.rooms_station import INFRA_AGENT, INFRA_DECIDER, RoomsStation
from tests.support.station import AGENT_TOKEN, DECIDER_TOKEN, request_body

pytestmark = pytest.mark.e2e

ANSWER = "dev.agentpod.permission.answer"


@pytest.fixture(scope="module")
async def rooms(homeserver: Homeserver, workdir: Path) -> AsyncIterator[RoomsStation]:
    st = RoomsStation(homeserver, workdir / "rooms")
    await st.setup()
    yield st
    await st.teardown()


async def _prompt(st: RoomsStation, rec: dict[str, Any], human: Human) -> dict[str, Any]:
    p = await st.prompt_for(rec["session_id"], seq=rec["request_seq"], human=human)
    assert p, f"no prompt for {rec['id']} in {human.user_id}'s view of {human.room_id}"
    return p


def _structured(rec: dict[str, Any], option: str = "allow_once") -> dict[str, Any]:
    return {ANSWER: {"request_id": rec["id"], "option_id": option,
                     "subject": {"digest": rec["digest"], "revision": rec["revision"]}}}


async def test_each_token_posts_to_its_own_room_whatever_the_body_says(rooms: RoomsStation, sid: str) -> None:
    infra = await rooms.post(request_body(sid + "i"), token=INFRA_AGENT[1])
    assert infra["room"] == "infra"
    await _prompt(rooms, infra, rooms.dave)
    # a body naming a room, a label and a session id that look like the other room: still the token's room
    d1 = await rooms.post({**request_body("infra"), "room": "infra", "label": "infra", "_meta": {"room": "infra"}},
                          token=AGENT_TOKEN[1])
    # the old single token: the default room
    d2 = await rooms.post({**request_body(sid + "l"), "room": "infra"}, token=rooms.token)
    for rec in (d1, d2):
        assert rec["room"] == "default", rec
        await _prompt(rooms, rec, rooms.alice)
        assert rec["params"].get("room") == "infra"  # kept and passed along, never used for routing
    assert not rooms.dave.find(lambda e: rooms.is_prompt(e) and content(e).get("request_id") in (d1["id"], d2["id"]))
    _, listed = await rooms.ahttp("GET", "/permissions?room=infra", token=DECIDER_TOKEN[1])
    assert infra["id"] in [r["id"] for r in listed] and not {d1["id"], d2["id"]} & {r["id"] for r in listed}
    _, listed = await rooms.ahttp("GET", "/permissions?room=default&session=infra", token=DECIDER_TOKEN[1])
    assert [r["id"] for r in listed] == [d1["id"]]
    await rooms.drain()


async def test_an_answer_from_the_other_room_settles_nothing(rooms: RoomsStation, sid: str) -> None:
    """alice answers the whole default room, and is a member of infra: none of her ways reaches infra's prompt."""
    await rooms.drain()
    rec = await rooms.post(request_body(sid), token=INFRA_AGENT[1])
    prompt = await _prompt(rooms, rec, rooms.dave)
    pid = prompt["event_id"]
    # in the default room, where alice answers: a reply and a structured answer naming infra's prompt
    # (a reaction or thread there on infra's prompt Synapse refuses: "Relations must be in the same room")
    await rooms.alice.text("1", reply_to=pid)
    await rooms.alice.text("(structured)", extra=_structured(rec))
    await rooms.alice.text("1")  # a plain number in the default room, nothing pending there
    # in infra itself, where alice is no answerer: plain, reply, reaction, structured
    mark = rooms.alice_infra.mark()
    await rooms.alice_infra.text("1")
    await rooms.alice_infra.text("1", reply_to=pid)
    await rooms.alice_infra.react(pid, "1️⃣")
    await rooms.alice_infra.text("(structured)", extra=_structured(rec))
    told = await rooms.notice_after(mark, human=rooms.alice_infra, contains="not on the list")
    assert told, "alice was not told that she does not answer in infra"
    # dave's answer comes after all of them in both rooms' order: it is the one that settles
    await rooms.dave.text("3 - not now", reply_to=pid)
    got = await rooms.record(rec["id"])
    assert got["state"] == "resolved" and got["outcome"]["answered_by"] == rooms.dave.user_id, got["outcome"]
    assert got["outcome"]["option_id"] == "reject_once"


async def test_infra_answerers_cannot_answer_the_default_room(rooms: RoomsStation, sid: str) -> None:
    await rooms.drain()
    rec = await rooms.post(request_body(sid), token=AGENT_TOKEN[1])
    prompt = await _prompt(rooms, rec, rooms.alice)
    # dave is an answerer in infra only; from there he names the default room's prompt every way he can
    await rooms.dave.text("1", reply_to=prompt["event_id"])
    await rooms.dave.text("(structured)", extra=_structured(rec))
    await rooms.dave.text("1")
    await rooms.alice.text("2", reply_to=prompt["event_id"])
    got = await rooms.record(rec["id"])
    assert got["outcome"]["answered_by"] == rooms.alice.user_id and got["outcome"]["option_id"] == "allow_always"


async def test_a_decider_limited_to_infra_does_not_see_the_default_room(rooms: RoomsStation, sid: str) -> None:
    d = await rooms.post(request_body(sid + "d"), token=AGENT_TOKEN[1])
    i = await rooms.post(request_body(sid + "i"), token=INFRA_AGENT[1])
    code, body = await rooms.ahttp("POST", f"/permissions/{d['id']}", {"decision": "approve"}, token=INFRA_DECIDER[1])
    assert code == 404 and body["error"] == "not_found", body
    assert (await rooms.record(d["id"], wait=0))["state"] == "pending"
    code, body = await rooms.ahttp("POST", f"/permissions/{i['id']}", {"decision": "deny"}, token=INFRA_DECIDER[1])
    assert code == 200 and body["outcome"]["answered_by"] == "api:infra-cli", body
    code, body = await rooms.ahttp("POST", f"/permissions/{d['id']}", {"decision": "deny"}, token=DECIDER_TOKEN[1])
    assert code == 200, body  # a decider without rooms decides every room


async def test_permissions_ls_filters_by_room(rooms: RoomsStation, sid: str) -> None:
    i = await rooms.post(request_body(sid), token=INFRA_AGENT[1])
    d = await rooms.post(request_body(sid + "d"), token=AGENT_TOKEN[1])
    out = rooms.cli("permissions", "ls", "--json", "--room", "infra")
    assert out.returncode == 0, out.stderr
    ids = {r["id"] for r in json.loads(out.stdout)}
    assert i["id"] in ids and d["id"] not in ids
    await rooms.drain()


async def test_invites_kicked_bot_rejoins_and_an_unknown_room_is_declined(rooms: RoomsStation, sid: str) -> None:
    other = rooms.hs.create_room(rooms.dave.token, invite=[rooms.bot_id], name="not configured")
    rooms.room_call(rooms.infra_id, "kick", {"user_id": rooms.bot_id, "reason": "test"}, rooms.dave.token)
    await rooms.dave.wait(lambda e: e.get("type") == "m.room.member" and e.get("state_key") == rooms.bot_id
                          and content(e).get("membership") == "leave", 30)
    rooms.room_call(rooms.infra_id, "invite", {"user_id": rooms.bot_id}, rooms.dave.token)
    back = await rooms.dave.wait(lambda e: e.get("type") == "m.room.member" and e.get("state_key") == rooms.bot_id
                                 and content(e).get("membership") == "join", 60, start=rooms.dave.mark() - 3)
    assert back, "the bot did not join infra again"
    rec = await rooms.post(request_body(sid), token=INFRA_AGENT[1])
    prompt = await _prompt(rooms, rec, rooms.dave)
    await rooms.dave.text("1", reply_to=prompt["event_id"])
    assert (await rooms.record(rec["id"]))["outcome"]["answered_by"] == rooms.dave.user_id
    state = rooms.hs_member(other)
    assert state == "leave", state


async def test_a_restart_keeps_each_records_room(rooms: RoomsStation, sid: str) -> None:
    i = await rooms.post(request_body(sid), token=INFRA_AGENT[1])
    prompt = await _prompt(rooms, i, rooms.dave)
    await rooms.restart_daemon()
    assert (await rooms.record(i["id"], wait=0))["room"] == "infra"
    await rooms.alice_infra.text("1", reply_to=prompt["event_id"])  # still no answerer there
    await rooms.dave.text("2", reply_to=prompt["event_id"])
    got = await rooms.record(i["id"])
    assert got["room"] == "infra" and got["outcome"]["answered_by"] == rooms.dave.user_id
    _, health = await rooms.ahttp("GET", "/healthz", token=None)
    by_name = {r["name"]: r for r in health["rooms"]}
    assert by_name["infra"]["joined"] and by_name["default"]["joined"], health
    assert by_name["infra"]["answerers_present"] and not by_name["infra"]["encrypted"]


async def test_doctor_and_metrics_report_each_room(rooms: RoomsStation) -> None:
    out = await asyncio.to_thread(rooms.cli, "doctor", "--config", str(rooms.config_path))
    lines = out.stdout.splitlines()
    assert any(x.startswith("ok   [infra] room:") and "is joined to" in x for x in lines), out.stdout
    assert any(x.startswith(f"ok   [infra] answerers: {rooms.dave.user_id} exists, has joined") for x in lines)
    code, text = await asyncio.to_thread(_get_text, rooms.api_url + "/metrics")
    assert code == 200
    assert 'permission_bot_room_joined{room="infra"} 1.0' in text
    assert 'permission_bot_room_answerers_present{room="default"} 1.0' in text


def _get_text(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.status, r.read().decode()
