"""Questions in many rooms and across a take-over (issue 33), against the real Synapse.

Two rooms: a question from the infra agent token is posted in infra only, answered only by infra's
answerers (alice, a member there but no answerer, changes nothing), and its answers reach the hook.
Two daemons on one PostgreSQL database: a question held by the standby's hook route while the leader is
killed is answered once, by the new leader, and the answer reaches the hook.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.demo.homeserver import Homeserver
from tests.support.ha import until_role
from tests.support.rooms_station import INFRA_AGENT, RoomsStation
from tests.support.station import AGENT_TOKEN, Station
from tests.test_ha_e2e import leader_and_standby, pair  # noqa: F401 (the module's two daemons)
from tests.test_questions_e2e import Q2, answered, hook_input

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
async def rooms(homeserver: Homeserver, workdir: Path) -> AsyncIterator[RoomsStation]:
    st = RoomsStation(homeserver, workdir / "q-rooms")
    await st.setup()
    yield st
    await st.teardown()


def one_question(sid: str) -> dict[str, object]:
    data = hook_input("hook-PermissionRequest-AskUserQuestion", sid)
    data["tool_input"]["questions"] = data["tool_input"]["questions"][1:]
    return data


async def test_a_question_is_answered_only_in_its_own_room(rooms: RoomsStation, sid: str) -> None:
    data = one_question(sid)
    call = asyncio.ensure_future(rooms.ahttp("POST", "/hooks/claude-code", data, token=INFRA_AGENT[1]))
    prompt = await rooms.prompt_for(sid, seq=1, human=rooms.dave)
    assert prompt, "no prompt in infra"
    assert not rooms.alice.find(lambda e: rooms.is_prompt(e) and e["content"].get("session_id") == sid)
    await rooms.alice_infra.text("1", reply_to=prompt["event_id"])  # a member of infra, not its answerer
    _, rec = await rooms.ahttp("GET", f"/permissions/{sid}:1?wait=2")
    assert rec["state"] == "pending" and rec["room"] == "infra" and rec["kind"] == "question"
    await rooms.dave.text("Docs", reply_to=prompt["event_id"])
    status, out = await asyncio.wait_for(call, 30)
    assert status == 200 and out == answered(data, {Q2: "Docs"})


async def test_a_question_pending_across_a_take_over(pair: list[Station]) -> None:  # noqa: F811
    leader, standby = leader_and_standby(pair)
    sid = "ha-question"
    data = one_question(sid)
    call = asyncio.ensure_future(standby.ahttp("POST", "/hooks/claude-code", data, token=AGENT_TOKEN[1]))
    prompt = await leader.prompt_for(sid, seq=1, timeout=60)
    assert prompt
    leader.kill_daemon()  # kill -9 with the question pending
    await leader.alice.text("1, 3", reply_to=prompt["event_id"])  # answered during the take-over
    await until_role(standby, "leader")
    status, out = await asyncio.wait_for(call, 90)
    assert status == 200 and out == answered(data, {Q2: "Docker, Docs"})
    got = await standby.record(f"{sid}:1")
    assert got["outcome"]["answers"] == {Q2: "Docker, Docs"} and got["outcome"]["via"] == "matrix"
    leader.start_daemon()
    await until_role(leader, "standby")
