"""The database lost with encryption on (issue 36): two daemons on a PostgreSQL primary and its synchronous
replica (a two-host URL), an encrypted station room, trust = "cross-signed", alice on matrix-js-sdk in
signed-devices isolation. The primary killed and the replica promoted, a request submitted during the
switch: the leader carries on in the encrypted room (her `1` settles it, no warning). Then the leader
killed -9: the standby takes over on the promoted database as the same cross-signed device (the copy of the
device there is the one the old primary confirmed), and her next answer settles too."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.demo.homeserver import Homeserver
from tests.support.dbloss import Seen, submit_until_taken
from tests.support.ha import peer_of, role_of, until_role
from tests.support.pg_replica import Pair, replicated, stop_immediately
from tests.support.station import Station, request_body
from tests.test_ha_e2ee_e2e import HaXSStation, _settled_by_her

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
async def pair(homeserver: Homeserver, workdir: Path) -> AsyncIterator[tuple[Pair, HaXSStation, Station]]:
    pg = await asyncio.to_thread(Pair)
    a = HaXSStation(homeserver, workdir / "dlx-a", "dlx", trust="cross-signed")
    b: Station | None = None
    try:
        a.url = a.env["PERMISSION_BOT_DATABASE_URL"] = await pg.create_database()
        await a.setup()
        assert await role_of(a) == "leader"
        b = peer_of(a, workdir / "dlx-b")
        b.start_daemon()
        await until_role(b, "standby")
        yield pg, a, b
    finally:
        await a.teardown()
        if b is not None:
            b.stop_daemon()
        pg.stop()


async def test_a_promotion_keeps_the_encrypted_room_and_the_device(
    pair: tuple[Pair, HaXSStation, Station], sid: str
) -> None:
    pg, a, b = pair
    await _settled_by_her(a, b, sid, "before")
    device = (await a.pg_kv("matrix.session"))["device_id"]
    while not replicated(pg):
        await asyncio.sleep(0.1)
    stop_immediately(pg.primary)
    body = request_body(sid, tool_call_id="during", key="during")
    during = asyncio.create_task(submit_until_taken([b, a], body, Seen()))
    await asyncio.sleep(2)
    await asyncio.to_thread(pg.replica.promote)
    rec = await asyncio.wait_for(during, 60)
    prompt = await a.js_prompt(sid, rec["request_seq"])
    assert prompt["encrypted"] and prompt["shield"] == 0, prompt
    await a.js_answer("1", prompt["event_id"])
    got = await b.record(rec["id"], wait=40)
    assert got["state"] == "resolved" and got["outcome"]["via"] == "matrix", got
    assert a.daemon is not None and a.daemon.poll() is None and await role_of(a) == "leader"

    a.kill_daemon()  # the standby takes over on the promoted database
    await until_role(b, "leader")
    await b.wait_healthy()
    assert (await a.pg_kv("matrix.session"))["device_id"] == device  # no new login
    await _settled_by_her(a, b, sid, "after")  # posted by the new leader: still the cross-signed device
    assert a.bot_device_signed(device)
