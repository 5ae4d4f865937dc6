"""Hostile input against the running daemon: junk HTTP bodies and junk room events never break it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.human import content
from tests.support.station import Station, request_body

pytestmark = pytest.mark.e2e

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=False)
    | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
FIELDS = ["sessionId", "toolCall", "options", "key", "label", "toolCallContext"]


@st.composite
def mutated_bodies(draw: st.DrawFn) -> Any:
    body: dict[str, Any] = request_body(f"hostile{draw(st.integers(0, 5))}")
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(["top", "toolCall", "option"]))
        value = draw(json_values)
        if where == "top":
            body[draw(st.sampled_from(FIELDS))] = value
        elif where == "toolCall" and isinstance(body.get("toolCall"), dict):
            body["toolCall"][draw(st.sampled_from(["toolCallId", "title", "kind", "rawInput", "locations",
                                                    "content", "_meta"]))] = value
        elif isinstance(body.get("options"), list) and body["options"]:
            opt = body["options"][0]
            if isinstance(opt, dict):
                opt[draw(st.sampled_from(["optionId", "name", "kind"]))] = value
    return body


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=st.one_of(json_values, mutated_bodies()))
def test_submit_never_500(station: Station, body: Any) -> None:
    st_, got = station.http("POST", "/permissions", body)
    assert st_ < 500, (st_, got)
    if st_ >= 400:
        assert isinstance(got, dict) and got.get("reason"), got
    elif st_ in (200, 201):
        station.http("POST", f"/permissions/{got['id']}", {"decision": "cancel"})


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=json_values, rid=st.text(max_size=20))
def test_decide_never_500(station: Station, body: Any, rid: str) -> None:
    from urllib.parse import quote

    st_, got = station.http("POST", f"/permissions/{quote(rid, safe='') or 'x'}", body)
    assert st_ < 500, (st_, got)


def test_raw_junk_and_huge_bodies(station: Station) -> None:
    for raw in (b"", b"{", b"\x00\x01", b"[" * 100000, json.dumps({"a": "x" * 3_000_000}).encode(),
                b'{"sessionId": "s", "toolCall": {"toolCallId": "x"}, "options": ' + b"[" * 5000 + b"]" * 5000 + b"}"):
        st_, got = station.http("POST", "/permissions", raw=raw)
        assert 400 <= st_ < 500, (st_, str(got)[:200])
    for q in ("wait=-1", "wait=nan", "wait=1e309", "wait=", "session="):
        st_, _ = station.http("GET", f"/permissions/x:1?{q}")
        assert st_ < 500
    st_, health = station.http("GET", "/healthz")
    assert st_ == 200 and health["ok"]


JUNK_CONTENTS: list[dict[str, Any]] = [
    {"msgtype": "m.text", "body": 5},
    {"msgtype": 7, "body": "1"},
    {"msgtype": "m.text", "body": "1", "m.relates_to": []},
    {"msgtype": "m.text", "body": "1", "m.relates_to": {"m.in_reply_to": "x"}},
    {"msgtype": "m.text", "body": "1", "m.relates_to": {"m.in_reply_to": {"event_id": 5}}},
    {"msgtype": "m.text", "body": "1", "m.relates_to": {"rel_type": "m.thread", "event_id": ["a"]}},
    {"msgtype": "m.text", "body": "x", "dev.agentpod.permission.answer": "1"},
    {"msgtype": "m.text", "body": "x", "dev.agentpod.permission.answer": {"request_id": 5, "option_id": None}},
    {"msgtype": "m.text", "body": "x", "dev.agentpod.permission.answer": {"request_id": "a:1", "option_id": "z",
                                                                        "subject": {"revision": "one"}}},
    {"msgtype": "m.text", "body": "x", "dev.agentpod.permission.answer": {"request_id": "a:1", "option_id": "z",
                                                                        "subject": [1]}},
    {"msgtype": "m.text", "body": "1", "m.new_content": 5},
    {"body": None},
]


async def _try_send(station: Station, c: dict[str, Any], etype: str = "m.room.message") -> None:
    """Send; what the homeserver itself refuses never reaches the bot, which is fine."""
    r = await station.alice.client.room_send(station.room_id, etype, c)
    assert hasattr(r, "event_id") or "M_" in str(r), r


async def test_junk_room_events_change_nothing_and_the_bot_keeps_answering(station: Station, sid: str) -> None:
    _st, rec = await station.ahttp("POST", "/permissions", request_body(sid))
    prompt = await station.prompt_for(sid)
    assert prompt
    for c in JUNK_CONTENTS:
        c = json.loads(json.dumps(c).replace('"a:1"', json.dumps(rec["id"])))
        await _try_send(station, c)
    await _try_send(station, {"m.relates_to": {"rel_type": "m.annotation", "event_id": 5, "key": ["1"]}}, "m.reaction")
    await _try_send(station, {"m.relates_to": "nope"}, "m.reaction")
    await _try_send(station, {"whatever": True}, "com.example.custom")
    _, got = await station.ahttp("GET", f"/permissions/{rec['id']}?wait=2")
    assert got["state"] == "pending"
    await station.alice.text("2", reply_to=prompt["event_id"])
    _, got = await station.ahttp("GET", f"/permissions/{rec['id']}?wait=15")
    assert got["state"] == "resolved" and got["outcome"]["option_id"] == "allow_always"
    assert "event_handler_failed" not in station.log_path.read_text(errors="replace")
    assert content(prompt)["request_id"] == rec["id"]
