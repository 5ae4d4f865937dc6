"""Rooms are a boundary, and floods are capped (issue 32, items 4 and 7, and session ids across rooms),
attacked end to end against the real Synapse.

One daemon for the module, with two rooms (the default room: alice answers; ``infra``: dave answers) and
the caps at their defaults (50 pending per agent token, 20 per session). Every attack must show or touch
nothing of the other room: 404, absent from a list or a stream, or refused with 409/429 and a reason.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.demo.homeserver import Homeserver
from tests.support.human import content
from tests.support.rooms_station import INFRA_AGENT, INFRA_DECIDER, RoomsStation
from tests.support.station import AGENT_B_TOKEN, AGENT_TOKEN, DECIDER_TOKEN, request_body
from tests.test_hooks_e2e import hook_input

pytestmark = pytest.mark.e2e

SECRET = "hunter2-in-the-env"


class BoundaryStation(RoomsStation):
    suffix = "bnd"


@pytest.fixture(scope="module")
async def st(homeserver: Homeserver, workdir: Path) -> AsyncIterator[BoundaryStation]:
    s = BoundaryStation(homeserver, workdir / "boundary")
    s.caps = {}  # the defaults: max_pending_per_token = 50, max_pending_per_session = 20
    await s.setup()
    yield s
    await s.teardown()


def _secret_body(sid: str, key: str | None = None) -> dict[str, Any]:
    body = request_body(sid, command="deploy --prod", key=key)
    body["toolCall"]["rawInput"]["env"] = {"DEPLOY_TOKEN": SECRET}
    return body


async def _ids(st: RoomsStation, path: str, token: str) -> set[str]:
    code, recs = await st.ahttp("GET", path, token=token)
    assert code == 200, recs
    return {r["id"] for r in recs}


async def _cancel_all(st: RoomsStation) -> None:
    _, pending = await st.ahttp("GET", "/permissions", token=DECIDER_TOKEN[1])
    for r in pending:
        await st.ahttp("POST", f"/permissions/{r['id']}", {"decision": "cancel"}, token=DECIDER_TOKEN[1])


async def test_infra_agent_token_reads_nothing_of_the_default_room(st: BoundaryStation, sid: str) -> None:
    d = await st.post(_secret_body(sid + "d"), token=AGENT_TOKEN[1])
    i = await st.post(request_body(sid + "i"), token=INFRA_AGENT[1])
    assert d["room"] == "default" and i["room"] == "infra"
    infra = INFRA_AGENT[1]
    # the list, every way it can be asked: only infra's requests
    for path in ("/permissions", "/permissions?room=default", f"/permissions?session={sid}d",
                 "/permissions?limit=1000", f"/permissions?room=default&session={sid}d&limit=5"):
        got = await _ids(st, path, infra)
        assert d["id"] not in got, path
    assert i["id"] in await _ids(st, "/permissions", infra)
    # one record, with and without a wait: 404 as for an unknown id (its env secret never shown)
    for path in (f"/permissions/{d['id']}", f"/permissions/{d['id']}?wait=5"):
        t0 = time.monotonic()
        code, body = await st.ahttp("GET", path, token=infra)
        assert code == 404 and body["error"] == "not_found" and SECRET not in json.dumps(body), (path, body)
        assert time.monotonic() - t0 < 3, "the wait was held for a request the caller may not see"
    # a decider limited to infra: the same
    assert d["id"] not in await _ids(st, "/permissions", INFRA_DECIDER[1])
    code, _ = await st.ahttp("GET", f"/permissions/{d['id']}", token=INFRA_DECIDER[1])
    assert code == 404
    # the owners see it: its own agent token, and a decider of every room
    assert d["id"] in await _ids(st, "/permissions", AGENT_TOKEN[1])
    code, body = await st.ahttp("GET", f"/permissions/{d['id']}", token=DECIDER_TOKEN[1])
    assert code == 200 and body["raw_input"]["env"]["DEPLOY_TOKEN"] == SECRET
    assert i["id"] not in await _ids(st, "/permissions", AGENT_TOKEN[1])  # and the other way round
    await _cancel_all(st)


async def _follow(st: RoomsStation, token: str, sink: list[dict[str, Any]], ready: asyncio.Event) -> None:
    auth = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession() as http, http.get(st.api_url + "/events", headers=auth) as resp:
        assert resp.status == 200
        ready.set()
        async for raw in resp.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("data: "):
                sink.append(json.loads(line[6:]))


async def test_infra_agent_token_follows_only_its_room(st: BoundaryStation, sid: str) -> None:
    seen: list[dict[str, Any]] = []
    ready = asyncio.Event()
    task = asyncio.create_task(_follow(st, INFRA_AGENT[1], seen, ready))
    try:
        await asyncio.wait_for(ready.wait(), 10)
        d = await st.post(_secret_body(sid + "d"), token=AGENT_TOKEN[1])
        await st.ahttp("POST", f"/permissions/{d['id']}", {"decision": "deny"}, token=DECIDER_TOKEN[1])
        i = await st.post(request_body(sid + "i"), token=INFRA_AGENT[1])  # after the default room's, both kinds
        for _ in range(100):
            if any(e.get("id") == i["id"] for e in seen):
                break
            await asyncio.sleep(0.1)
        assert [e["id"] for e in seen] == [i["id"]], seen  # the default room's request and its resolution: never
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    await _cancel_all(st)


async def _session_rule(st: RoomsStation, sid: str) -> tuple[dict[str, Any], str]:
    """A session rule in the default room: a proxy-keyed request, alice answers ``s``."""
    key = f"{secrets.token_hex(16)}:1"
    rec = await st.post(request_body(sid, command="make test", key=key), token=AGENT_TOKEN[1])
    prompt = await st.prompt_for(sid, seq=rec["request_seq"])
    assert prompt and "Allow for this session" in content(prompt)["body"]
    await st.alice.text("s", reply_to=prompt["event_id"])
    for _ in range(100):
        _, body = await st.ahttp("GET", f"/rules?session={sid}", token=DECIDER_TOKEN[1])
        if body["rules"]:
            return body["rules"][0], key
        await asyncio.sleep(0.1)
    raise AssertionError("alice's 's' made no session rule")


async def test_rules_of_the_default_room_are_out_of_infras_reach(st: BoundaryStation, sid: str) -> None:
    rule, key = await _session_rule(st, sid)
    for token in (INFRA_AGENT[1], INFRA_DECIDER[1]):
        code, body = await st.ahttp("GET", "/rules", token=token)
        assert code == 200 and rule["id"] not in [r["id"] for r in body["rules"]], body
        _, body = await st.ahttp("GET", f"/rules?session={sid}", token=token)
        assert body["rules"] == []
    # the decider limited to infra cannot revoke it; infra's agent token cannot end its session
    code, body = await st.ahttp("DELETE", f"/rules/{rule['id']}", token=INFRA_DECIDER[1])
    assert code == 404 and body["error"] == "not_found", body
    code, body = await st.ahttp("POST", "/rules/end", {"key": key, "sessionId": sid}, token=INFRA_AGENT[1])
    assert code == 404, body
    _, body = await st.ahttp("GET", f"/rules?session={sid}", token=AGENT_TOKEN[1])  # its own room's token sees it
    assert [r["id"] for r in body["rules"]] == [rule["id"]]
    # still in force: the same request again is settled by it
    again = await st.post(request_body(sid, command="make test", key=key[:-1] + "2"), token=AGENT_TOKEN[1])
    assert again["state"] == "resolved" and again["outcome"]["via"] == "rule", again
    code, body = await st.ahttp("DELETE", f"/rules/{rule['id']}", token=DECIDER_TOKEN[1])  # a decider of every room
    assert code == 200 and body["revoked"]["id"] == rule["id"]


async def test_a_session_of_one_room_is_never_joined_from_another(st: BoundaryStation, sid: str) -> None:
    key = f"{secrets.token_hex(16)}:1"
    first = await st.post(request_body(sid, key=key), token=AGENT_TOKEN[1])
    assert first["id"] == f"{sid}:1" and first["room"] == "default"
    # infra's token under the default room's session id: refused, whatever the door
    for body in (request_body(sid), request_body(sid, key=key), request_body(sid, key=key[:-1] + "9")):
        code, got = await st.ahttp("POST", "/permissions", body, token=INFRA_AGENT[1])
        assert code == 409 and got["error"] == "session_in_other_room", got
        assert "id" not in got and "default" not in got["reason"]  # neither the record nor the room shown
    code, got = await st.ahttp("POST", "/sessions/claim", {"sessionId": sid, "key": key}, token=INFRA_AGENT[1])
    assert code == 409 and got["error"] == "session_in_other_room", got
    hook = hook_input("claude-code-http-PermissionRequest-Bash", sid)
    code, got = await st.ahttp("POST", "/hooks/claude-code", hook, token=INFRA_AGENT[1])
    assert code == 409 and got["error"] == "session_in_other_room", got
    code, got = await st.ahttp("POST", "/rules/end", {"key": key, "sessionId": sid}, token=INFRA_AGENT[1])
    assert code == 404, got
    # the session goes on untouched: the next seq is 2, and nothing of infra's is in it
    nxt = await st.post(request_body(sid, tool_call_id="call_2"), token=AGENT_TOKEN[1])
    assert nxt["id"] == f"{sid}:2"
    code, got = await st.ahttp("GET", f"/permissions/{sid}:3", token=DECIDER_TOKEN[1])
    assert code == 404
    # and the other way round: infra's session is not the default room's to join
    mine = await st.post(request_body(sid + "x"), token=INFRA_AGENT[1])
    code, got = await st.ahttp("POST", "/permissions", request_body(sid + "x"), token=AGENT_TOKEN[1])
    assert code == 409 and got["error"] == "session_in_other_room" and mine["room"] == "infra"
    await _cancel_all(st)


async def test_a_flood_is_capped_and_a_real_prompt_is_posted_promptly(st: BoundaryStation, sid: str) -> None:
    await _cancel_all(st)
    mark = st.alice.mark()
    codes: list[int] = []
    for n in range(150):  # agent-b, back to back, each in a session of its own: the token's cap
        code, got = await st.ahttp("POST", "/permissions", request_body(f"{sid}f{n}"), token=AGENT_B_TOKEN[1])
        codes.append(code)
        if code == 429:
            assert got["error"] == "too_many_pending" and "max_pending_per_token" in got["reason"], got
    assert codes == [201] * 50 + [429] * 100, {c: codes.count(c) for c in set(codes)}
    t0 = time.monotonic()
    real = await st.post(request_body(sid + "real"), token=AGENT_TOKEN[1])  # another token: not held back
    prompt = await st.prompt_for(real["session_id"], seq=1, timeout=60)
    took = time.monotonic() - t0
    print(f"\nmeasured: the real prompt posted {took:.2f}s after its submission, behind a capped flood of 50")
    assert prompt and took < 20
    # the room heard it once, for 100 refusals
    told = await st.notice_after(mark, contains="'agent-b' has 50 pending requests", timeout=20)
    assert told, "the room was not told that agent-b is at its cap"
    await asyncio.sleep(1)
    notes = [e for e in st.alice.events[mark:] if "'agent-b' has 50 pending" in content(e).get("body", "")]
    assert len(notes) == 1, notes
    # one session: 20 at most, whoever submits (infra's token, in its room)
    for n in range(20):
        await st.post(request_body(sid + "s", tool_call_id=f"c{n}"), token=INFRA_AGENT[1])
    over = request_body(sid + "s", tool_call_id="c20")
    code, got = await st.ahttp("POST", "/permissions", over, token=INFRA_AGENT[1])
    assert code == 429 and got["error"] == "too_many_pending" and "max_pending_per_session" in got["reason"], got
    await _cancel_all(st)
    again = await st.post(request_body(f"{sid}f150"), token=AGENT_B_TOKEN[1])  # answered: whole again
    assert again["state"] == "pending"
    await _cancel_all(st)


async def test_a_session_claim_takes_only_an_agent_token_and_a_proxy_key(st: BoundaryStation, sid: str) -> None:
    key = f"{secrets.token_hex(16)}:0"
    for body, token, want in [
        ({"sessionId": sid, "key": "proxy1:0"}, AGENT_TOKEN[1], 422),  # not a key of the proxy's form
        ({"sessionId": "a/../b", "key": key}, AGENT_TOKEN[1], 422),
        ({"sessionId": sid, "key": key}, DECIDER_TOKEN[1], 403),  # a decider relays no agent
        ({"sessionId": sid, "key": key}, AGENT_TOKEN[1], 200),
        ({"sessionId": sid, "key": key}, AGENT_TOKEN[1], 200),  # the same claim again
        ({"sessionId": sid, "key": key}, AGENT_B_TOKEN[1], 409),  # another token: session_claimed
    ]:
        code, got = await st.ahttp("POST", "/sessions/claim", body, token=token)
        assert code == want, (body, token, got)
