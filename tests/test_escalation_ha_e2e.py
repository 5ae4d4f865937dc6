"""An escalation across a take-over (issue 37): two daemons on one PostgreSQL database, the leader killed
before a prompt was due; the new leader escalates it from the inbox's clock, once, and carol answers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.demo.homeserver import Homeserver
from tests.support.ha import HaStation, peer_of, role_of, until_role
from tests.support.postgres import PgCluster
from tests.support.station import Station, request_body
from tests.test_escalation_e2e import AFTER, _escalations, _is_escalation

pytestmark = pytest.mark.e2e


class EscHa(HaStation):
    suffix = "haesc"

    def config_text(self) -> str:
        return super().config_text() + f'\n[escalation]\nafter = "{int(AFTER)}s"\nmention = ["{self.carol.user_id}"]\n'


@pytest.fixture(scope="module")
async def pair(homeserver: Homeserver, workdir: Path, pg_cluster: PgCluster) -> AsyncIterator[list[Station]]:
    a = EscHa(homeserver, workdir / "esc-ha-a")
    a.env["PERMISSION_BOT_DATABASE_URL"] = await pg_cluster.create_database()
    await a.setup()
    assert await role_of(a) == "leader"
    b = peer_of(a, workdir / "esc-ha-b")
    b.start_daemon()
    await until_role(b, "standby")
    await a.carol.follow()
    yield [a, b]
    await a.teardown()
    b.stop_daemon()


async def test_an_escalation_survives_a_take_over(pair: list[Station], sid: str) -> None:
    leader, standby = pair
    rec = await standby.post(request_body(sid))
    prompt = await leader.prompt_for(sid)
    assert prompt
    leader.kill_daemon()  # before it is due
    await until_role(standby, "leader")
    st = leader  # the room's people
    ev = await st.alice.wait(lambda e: _is_escalation(st, e, prompt["event_id"]), AFTER + 30)
    assert ev, "the new leader did not escalate it"
    await st.carol.text("1", reply_to=prompt["event_id"])
    done = await standby.record(rec["id"], wait=20)
    assert done["state"] == "resolved" and done["outcome"]["answered_by"] == st.carol.user_id
    await asyncio.sleep(1)
    assert len(_escalations(st, prompt["event_id"])) == 1
