"""Each daemon owns the hooks it holds (issue 32, item 5), with real daemons on a real PostgreSQL database.
A third daemon starting beside a leader and a standby that each hold a hook withdraws neither: the requests
stay pending, their prompts unedited, and an answer in the room reaches each hook. A daemon killed -9 while
holding a hook: its request is withdrawn by the survivors once its lease expires (bot.service.hook_leases)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.demo.homeserver import Homeserver
from bot.service.hook_leases import BEAT, LEASE
from tests.support.ha import HaStation, peer_of, role_of, until_role
from tests.support.human import content
from tests.support.postgres import PgCluster
from tests.support.station import Station
from tests.test_hooks_e2e import finish, hook_input, start_hook

pytestmark = pytest.mark.e2e
ALLOW = {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}


class HooksHaStation(HaStation):
    suffix = "hh"


@pytest.fixture(scope="module")
async def pair(homeserver: Homeserver, workdir: Path, pg_cluster: PgCluster) -> AsyncIterator[list[Station]]:
    a = HooksHaStation(homeserver, workdir / "hh-a")
    a.env["PERMISSION_BOT_DATABASE_URL"] = await pg_cluster.create_database()
    await a.setup()  # a starts first: the leader
    assert await role_of(a) == "leader"
    b = peer_of(a, workdir / "hh-b")
    b.start_daemon()
    await until_role(b, "standby")
    yield [a, b]
    await a.teardown()
    b.stop_daemon()


async def test_a_third_daemon_starting_withdraws_no_live_hook(pair: list[Station], workdir: Path, sid: str) -> None:
    a, b = pair
    hooks, prompts = [], []
    for i, st in enumerate((a, b)):  # one hook held by the leader, one by the standby
        proc = await start_hook(st, hook_input("claude-code-PermissionRequest-Bash", f"{sid}-{i}", command=f"ls {i}"))
        prompt = await a.prompt_for(f"{sid}-{i}")
        assert prompt, "no prompt"
        hooks.append(proc)
        prompts.append(prompt)
    c = peer_of(a, workdir / "hh-c")
    c.start_daemon()
    try:
        await until_role(c, "standby")
        await asyncio.sleep(LEASE + 3 * BEAT)  # c has been live a whole lease: it judges others now
        for i in range(2):
            _, rec = await c.ahttp("GET", f"/permissions/{sid}-{i}:1")
            assert rec["state"] == "pending", rec
            assert hooks[i].returncode is None, "a live hook stood down"
            assert await a.edit_of(prompts[i]["event_id"], timeout=0.5) is None, "a live hook's prompt was edited"
        assert "hook_request_withdrawn" not in c.log_path.read_text()
        for i in range(2):
            await a.alice.text("1", reply_to=prompts[i]["event_id"])
            code, out, _ = await finish(hooks[i])
            assert code == 0 and out == ALLOW, out  # the answer in the room reached the hook
    finally:
        c.stop_daemon()


async def test_a_daemon_killed_holding_a_hook_loses_it_when_its_lease_expires(pair: list[Station], sid: str) -> None:
    a, b = pair
    proc = await start_hook(b, hook_input("claude-code-PermissionRequest-Bash", sid))
    prompt = await a.prompt_for(sid)
    assert prompt, "no prompt"
    b.kill_daemon()  # kill -9: no clean stop, its lease row stays behind
    killed = time.monotonic()
    code, out, err = await finish(proc)
    assert code == 0 and "connection lost" in err and "hookSpecificOutput" not in out  # no decision
    edit = await a.edit_of(prompt["event_id"], timeout=LEASE + 6 * BEAT)
    took = time.monotonic() - killed
    print(f"a killed holder's hook withdrawn after {took:.1f} s (lease {LEASE} s)")
    assert edit and "the daemon the hook waited on stopped" in content(edit)["m.new_content"]["body"]
    _, rec = await a.ahttp("GET", f"/permissions/{sid}:1")
    assert rec["state"] == "cancelled" and rec["outcome"]["answered_by"] == "claude-code hook", rec
    assert took >= LEASE - BEAT - 0.5, "withdrawn before the holder's lease expired"
    b.start_daemon()  # restarted by its manager: a standby again
    await until_role(b, "standby")
