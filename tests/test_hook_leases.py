"""Each daemon owns the hooks it holds (issue 32, item 5): a daemon withdraws only the hook requests whose
holder is gone. On SQLite (one daemon) its start withdraws an earlier run's; on PostgreSQL a holder is gone
when its lease, renewed on the database's clock, ran out, and a judge must itself have been live that long.
The end-to-end test with real daemons is tests/test_ha_hooks_e2e.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from bot.inbox.db import create
from bot.inbox.store import Inbox
from bot.inbox.submission import parse_submission
from bot.service.hook_leases import HOLDER_GONE, RESTARTED, HookLeases
from tests.support.station import request_body

LEASE, BEAT = 0.4, 0.05


async def _held(ib: Inbox, holder: str | None, sid: str) -> str:
    rec, _ = await ib.submit(parse_submission({**request_body(sid), "label": "claude-code"}), time.time(), 600,
                             held_by=holder)
    return rec.id


async def _state(ib: Inbox, rid: str) -> str:
    rec = await ib.get(rid)
    assert rec is not None
    return str(rec.state)


async def test_sqlite_a_start_withdraws_what_an_earlier_run_held_only(sqlite_inbox: Inbox) -> None:
    # SQLite: one daemon at a time
    old, mine = await _held(sqlite_inbox, "run-1", "s1"), await _held(sqlite_inbox, "run-2", "s2")
    plain = await _held(sqlite_inbox, None, "s3")
    await HookLeases(sqlite_inbox, "run-2", time.time).start()
    assert [await _state(sqlite_inbox, r) for r in (old, mine, plain)] == ["cancelled", "pending", "pending"]
    rec = await sqlite_inbox.get(old)
    assert rec is not None and rec.outcome is not None
    assert rec.outcome.feedback == RESTARTED and rec.outcome.answered_by == "claude-code hook"


@pytest.fixture
async def three(pg_url: str) -> AsyncIterator[list[Inbox]]:
    ibs = [Inbox(create(pg_url, holder=h)) for h in "abc"]
    for ib in ibs:
        await ib.open()
    yield ibs
    for ib in ibs:
        await ib.close()


async def _run(leases: HookLeases, stop: asyncio.Event) -> asyncio.Task[None]:
    await leases.start()
    return asyncio.create_task(leases.run(stop))


async def test_postgres_a_new_daemon_withdraws_nothing_live_and_a_gone_holders_hooks_go(three: list[Inbox]) -> None:
    a, b, c = three
    stops = [asyncio.Event() for _ in range(3)]
    la, lb, lc = (HookLeases(ib, h, time.time, beat=BEAT, lease=LEASE) for ib, h in zip(three, "abc", strict=True))
    ta, tb = await _run(la, stops[0]), await _run(lb, stops[1])
    on_a, on_b = await _held(a, "a", "sa"), await _held(b, "b", "sb")
    before = await _held(a, "", "old")  # held before the schema step: its holder is unknown, so gone
    tc = await _run(lc, stops[2])  # a third daemon starts
    await asyncio.sleep(LEASE * 3)
    assert [await _state(c, r) for r in (on_a, on_b, before)] == ["pending", "pending", "cancelled"]
    stops[0].set()  # a stops renewing, as a daemon killed -9 (no clean stop: its lease row stays)
    await ta
    deadline = time.monotonic() + 10
    while await _state(c, on_a) == "pending":
        assert time.monotonic() < deadline, "a's hook request was never withdrawn"
        await asyncio.sleep(BEAT)
    rec = await c.get(on_a)
    assert rec is not None and rec.outcome is not None and rec.outcome.feedback == HOLDER_GONE
    assert await _state(c, on_b) == "pending"  # b is alive
    await lb.close()  # a clean stop drops b's lease: what it still held goes at once (after c's next beat)
    stops[1].set()
    await tb
    deadline = time.monotonic() + 10
    while await _state(c, on_b) == "pending":
        assert time.monotonic() < deadline, "b's hook request was never withdrawn"
        await asyncio.sleep(BEAT)
    stops[2].set()
    await tc


async def test_postgres_a_judge_that_was_not_live_for_a_whole_lease_judges_nobody(three: list[Inbox]) -> None:
    a, _, c = three
    gone = await _held(a, "a", "s")  # a never renewed: gone
    lc = HookLeases(c, "c", time.time, beat=BEAT, lease=LEASE)
    stop = asyncio.Event()
    tc = await _run(lc, stop)
    await asyncio.sleep(LEASE / 2)
    assert await _state(c, gone) == "pending"  # c itself has not been live for a lease yet
    await asyncio.sleep(LEASE)
    assert await _state(c, gone) == "cancelled"
    stop.set()
    await tc
