"""High availability (issue 27): two daemons on one PostgreSQL database, one leader, the other a standby that
serves the whole API. The leader killed (-9) with 20 prompts pending and answers arriving during the take-over:
each settled exactly once, no prompt posted twice. The leader paused (SIGSTOP) 20 s: another takes over, and
the paused one, resumed, posts, edits and settles nothing: it demotes itself in-process (never an exit), serves
the API as a standby, and is elected again with a fresh term when the new leader dies (issue 36)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest

from bot.demo.homeserver import Homeserver
from bot.matrix.txn import txn_id
from tests.support.ha import HaStation, peer_of, role_of, until_logged, until_role
from tests.support.human import rel
from tests.support.postgres import PgCluster
from tests.support.station import AGENT_TOKEN, DECIDER_TOKEN, Station, request_body

pytestmark = pytest.mark.e2e
AGENT, DECIDER = AGENT_TOKEN[1], DECIDER_TOKEN[1]
ACTS = ("prompt_posted", "prompt_edited", "request_expired")  # what a daemon logs when it acts in the room


@pytest.fixture(scope="module")
async def pair(homeserver: Homeserver, workdir: Path, pg_cluster: PgCluster) -> AsyncIterator[list[Station]]:
    a = HaStation(homeserver, workdir / "ha-a")
    a.env["PERMISSION_BOT_DATABASE_URL"] = await pg_cluster.create_database()
    await a.setup()  # a starts first: the leader
    assert await role_of(a) == "leader"
    b = peer_of(a, workdir / "ha-b")
    b.start_daemon()
    await until_role(b, "standby")
    yield [a, b]
    await a.teardown()
    b.stop_daemon()


def leader_and_standby(pair: list[Station]) -> tuple[Station, Station]:
    roles = {s.http("GET", "/healthz")[1]["role"]: s for s in pair}
    return roles["leader"], roles["standby"]


def bot_events(st: Station, sid: str) -> tuple[list[dict[str, Any]], Counter[str]]:
    """The prompts of session ``sid`` in the room, and the number of settled edits of each."""
    prompts = st.alice.find(lambda e: st.is_prompt(e) and e["content"].get("session_id") == sid)
    ids = {p["event_id"] for p in prompts}
    edits = Counter(
        rel(e)["event_id"] for e in st.alice.events
        if e.get("sender") == st.bot_id and rel(e).get("rel_type") == "m.replace" and rel(e).get("event_id") in ids
    )
    return prompts, edits


async def test_the_standby_says_it_is_one(pair: list[Station]) -> None:
    leader, standby = leader_and_standby(pair)
    deadline = time.monotonic() + 15  # said once its first wait for the lock ran out (a second)
    while "event='standby'" not in standby.log_path.read_text(errors="replace"):
        assert time.monotonic() < deadline, "the standby never said it is one"
        await asyncio.sleep(0.2)
    assert "event='leader_elected'" in leader.log_path.read_text(errors="replace")


async def test_a_standby_serves_decisions_and_events(pair: list[Station], sid: str) -> None:
    leader, standby = leader_and_standby(pair)
    auth = {"Authorization": f"Bearer {DECIDER}"}
    async with aiohttp.ClientSession(headers=auth) as http, http.get(standby.api_url + "/events") as resp:
        rec = await standby.post(request_body(sid), token=AGENT)
        prompt = await leader.prompt_for(sid)  # posted by the leader: the standby has no Matrix side
        assert prompt is not None
        code, decided = await standby.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "approve"},
                                            token=DECIDER)
        assert code == 200 and decided["state"] == "resolved", decided
        assert await leader.edit_of(prompt["event_id"]), "the leader did not edit the prompt the standby settled"
        seen = []
        async for raw in resp.content:
            line = raw.decode().strip()
            if line.startswith("event: "):
                seen.append(line[7:])
            if "permission-resolved" in seen:
                break
    assert seen[:1] == ["permission-request"] and "permission-resolved" in seen
    code, health = await standby.ahttp("GET", "/healthz")
    assert health["role"] == "standby" and health["status"] == "ok" and not health["matrix_ready"]


async def test_the_leader_killed_with_20_pending_loses_nothing_and_doubles_nothing(pair: list[Station]) -> None:
    leader, standby = leader_and_standby(pair)
    sid = "ha-kill"
    recs = []
    for i in range(20):
        rec = await standby.post(request_body(sid, tool_call_id=f"c{i}"), token=AGENT)
        recs.append(rec)
    prompts: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    while len(prompts) < 20 and time.monotonic() < deadline:
        prompts, _ = bot_events(leader, sid)
        await asyncio.sleep(0.2)
    assert len(prompts) == 20
    by_seq = {p["content"]["request_seq"]: p["event_id"] for p in prompts}
    leader.kill_daemon()  # kill -9: its lock frees when its connection closes
    answered = []
    for rec in recs:  # answers arrive while the standby takes over
        answered.append(await leader.alice.text("1", reply_to=by_seq[rec["request_seq"]]))
    took = await until_role(standby, "leader")
    print(f"take-over after kill -9: {took:.2f} s")
    for rec in recs:
        got = await standby.record(rec["id"], wait=60)
        assert got["state"] == "resolved" and got["outcome"]["via"] == "matrix", got
        assert got["outcome"]["answered_by"] == leader.alice.user_id
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        prompts, edits = bot_events(leader, sid)
        if len(edits) == 20:
            break
        await asyncio.sleep(0.2)
    await asyncio.sleep(2)  # any late double would show by now (not a timing assert: counts below)
    prompts, edits = bot_events(leader, sid)
    assert len(prompts) == 20 and set(edits.values()) == {1}, (len(prompts), edits)
    leader.start_daemon()  # restarted: it joins as a standby
    await until_role(leader, "standby")


async def test_a_paused_leader_acts_on_nothing_after_the_take_over(pair: list[Station]) -> None:
    leader, standby = leader_and_standby(pair)
    sid = "ha-stop"
    assert leader.daemon is not None
    os.kill(leader.daemon.pid, signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        took = await until_role(standby, "leader")
        print(f"take-over after SIGSTOP: {took:.2f} s")
        rec = await standby.post(request_body(sid), token=AGENT)
        prompt = await standby.prompt_for(sid)
        assert prompt is not None
        await standby.alice.text("1", reply_to=prompt["event_id"])  # the paused one's sync may hold it too
        got = await standby.record(rec["id"], wait=30)
        assert got["state"] == "resolved"
        other = await standby.post(request_body(sid, tool_call_id="c2"), token=AGENT)
        await asyncio.sleep(max(0.0, 20 - (time.monotonic() - stopped)))
        mark = leader.log_path.stat().st_size
    finally:
        os.kill(leader.daemon.pid, signal.SIGCONT)
    after = await until_logged(leader, "leader_demoted", mark)  # in-process: the daemon goes on
    await until_role(leader, "standby")
    acted = [ln for ln in after.splitlines() if any(w in ln for w in ACTS)]
    assert not acted, acted
    assert "Traceback" not in after, after
    prompt2 = await standby.prompt_for(sid, seq=other["request_seq"])
    assert prompt2 is not None
    prompts, edits = bot_events(standby, sid)
    assert len(prompts) == 2 and edits[prompt["event_id"]] == 1, (prompts, edits)
    states = json.dumps([await standby.record(rec["id"], wait=1)])
    assert '"resolved"' in states
    # the demoted daemon serves the API as a standby; the leader posts it
    third = await leader.post(request_body(sid, tool_call_id="c3"), token=AGENT)
    assert await standby.prompt_for(sid, seq=third["request_seq"]) is not None
    # the new leader dies: the demoted one is elected again (a fresh term) and takes up the database's state
    mark = leader.log_path.stat().st_size
    standby.kill_daemon()
    fourth = await leader.post(request_body(sid, tool_call_id="c4"), token=AGENT)
    await until_role(leader, "leader")
    prompt4 = await leader.prompt_for(sid, seq=fourth["request_seq"])
    assert prompt4 is not None
    await leader.alice.text("1", reply_to=prompt4["event_id"])
    got = await leader.record(fourth["id"], wait=30)
    assert got["state"] == "resolved" and got["outcome"]["via"] == "matrix", got
    assert await leader.edit_of(prompt4["event_id"])
    await asyncio.sleep(2)  # any late double would show by now (not a timing assert: counts below)
    prompts, edits = bot_events(leader, sid)
    assert len(prompts) == 4 and edits[prompt4["event_id"]] == 1 and edits[prompt["event_id"]] == 1, (prompts, edits)
    assert "Traceback" not in leader.log_path.read_bytes()[mark:].decode(errors="replace")
    standby.start_daemon()
    await until_role(standby, "standby")


async def test_a_prompt_the_old_leader_posted_but_never_recorded_is_not_posted_again(pair: list[Station]) -> None:
    """The leader sends a prompt and stops before recording it (here: the send made with its access token and
    the prompt's deterministic txn id, then the leader paused): the new leader's post of that request is
    the same event, so the room shows one prompt."""
    leader, standby = leader_and_standby(pair)
    sid = "ha-unrecorded"
    assert leader.daemon is not None
    os.kill(leader.daemon.pid, signal.SIGSTOP)  # from here the request is posted only after the take-over
    try:
        rec = await standby.post(request_body(sid), token=AGENT)
        conn = await asyncpg.connect(standby.env["PERMISSION_BOT_DATABASE_URL"])
        try:
            kv = dict(await conn.fetch("SELECT k, v FROM kv WHERE k IN ('install_id', 'matrix.session')"))
        finally:
            await conn.close()
        session = json.loads(kv["matrix.session"])
        txn = txn_id("p", kv["install_id"], rec["id"])
        url = f"{leader.hs.url}/_matrix/client/v3/rooms/{leader.room_id}/send/m.room.message/{txn}"
        body = {"msgtype": "m.notice", "body": "the old leader's prompt, sent but not recorded"}
        async with aiohttp.ClientSession() as http, http.put(
            url, json=body, headers={"Authorization": f"Bearer {session['access_token']}"}
        ) as r:
            assert r.status == 200
            sent = (await r.json())["event_id"]
        await until_role(standby, "leader")
        got: dict[str, Any] = {}
        deadline = time.monotonic() + 30
        while not got.get("prompt_event_id") and time.monotonic() < deadline:
            _, got = await standby.ahttp("GET", f"/permissions/{rec['id']}")
            await asyncio.sleep(0.2)
        assert got["prompt_event_id"] == sent  # the homeserver answered the repeated txn with the first event
        mark = leader.log_path.stat().st_size
    finally:
        os.kill(leader.daemon.pid, signal.SIGCONT)
    await until_logged(leader, "leader_demoted", mark)
    await until_role(leader, "standby")
    await asyncio.sleep(1)
    assert not standby.alice.find(lambda e: st_prompt(standby, e, sid)), "a second prompt was posted"


def st_prompt(st: Station, e: dict[str, Any], sid: str) -> bool:
    return st.is_prompt(e) and e["content"].get("session_id") == sid


async def test_the_ledger_is_one_chain_across_a_take_over(pair: list[Station]) -> None:
    """Settlements on both daemons at once, the leader killed in the middle: the ledger (every settlement of
    this module's tests, through every take-over above) is one chain from seq 1, no fork, no gap."""
    leader, standby = leader_and_standby(pair)
    sid = "ha-ledger"
    recs = []
    for i in range(20):
        rec = await standby.post(request_body(sid, tool_call_id=f"c{i}"), token=AGENT)
        recs.append(rec)

    async def decide(st: Station, rec: dict[str, Any]) -> None:
        code, got = await st.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "approve"}, token=DECIDER)
        assert code == 200, got

    await asyncio.gather(*(decide(leader if i % 2 else standby, r) for i, r in enumerate(recs[:10])))
    leader.kill_daemon()
    await asyncio.gather(*(decide(standby, r) for r in recs[10:]))  # while it takes over
    await until_role(standby, "leader")
    leader.start_daemon()
    await until_role(leader, "standby")
    env = {"PERMISSION_BOT_DATABASE_URL": standby.env["PERMISSION_BOT_DATABASE_URL"]}
    out = await asyncio.to_thread(standby.cli, "audit", "export", "--config", str(standby.config_path), env=env)
    assert out.returncode == 0, out.stderr
    entries = [json.loads(x) for x in out.stdout.splitlines()]
    assert [e["seq"] for e in entries] == list(range(1, len(entries) + 1))
    assert Counter(e["request_id"] for e in entries if e["request_id"].startswith(sid)) == {r["id"]: 1 for r in recs}
    ok = await asyncio.to_thread(standby.cli, "audit", "verify", "--config", str(standby.config_path), env=env)
    assert ok.returncode == 0 and f"{len(entries)} entries" in ok.stdout, ok.stderr
