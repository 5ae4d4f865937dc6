"""The inbox on one PostgreSQL database shared by several daemons: a key binds once, a request settles once,
and each submission of a session gets its own number."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from bot.events.states import Via
from bot.inbox.db import create
from bot.inbox.db.fence import FENCE, Deposed, Fence, confirm
from bot.inbox.db.leader import LEADERSHIP
from bot.inbox.other_daemons import Across
from bot.inbox.record import Settlement
from bot.inbox.store import Inbox
from bot.inbox.submission import parse_submission
from tests.support.station import request_body


@pytest.fixture
async def two(pg_url: str) -> AsyncIterator[tuple[Inbox, Inbox]]:
    a, b = Inbox(create(pg_url, holder="a")), Inbox(create(pg_url, holder="b"))
    await asyncio.gather(a.open(), b.open())  # both upgrade at once: each step runs once
    yield a, b
    await a.close()
    await b.close()


async def test_the_same_key_from_two_daemons_at_once_is_one_request(two: tuple[Inbox, Inbox]) -> None:
    a, b = two
    body = {**request_body("s"), "key": "k1"}
    got = await asyncio.gather(*(ib.submit(parse_submission(body), 1.0, 60) for ib in (a, b, a, b)))
    assert {rec.id for rec, _ in got} == {"s:1"} and sum(created for _, created in got) == 1


async def test_submissions_of_one_session_on_two_daemons_number_in_turn(two: tuple[Inbox, Inbox]) -> None:
    a, b = two
    subs = [parse_submission(request_body("s", tool_call_id="c")) for _ in range(20)]
    got = await asyncio.gather(*(ib.submit(sub, 1.0, 60) for ib, sub in zip([a, b] * 10, subs, strict=True)))
    assert sorted(rec.request_seq for rec, _ in got) == list(range(1, 21))
    assert sorted(rec.revision for rec, _ in got) == list(range(1, 21))


async def test_a_request_settles_once_whichever_daemon_answers(two: tuple[Inbox, Inbox]) -> None:
    a, b = two
    rec, _ = await a.submit(parse_submission(request_body("s")), 1.0, 60)
    got = await asyncio.gather(*(
        ib.settle(rec.id, Settlement(option_id="allow_once", by=f"@{i}:x", via=Via.MATRIX, now=2.0))
        for i, ib in enumerate([a, b] * 5)
    ))
    assert len([r for r in got if r is not None]) == 1
    after = await b.get(rec.id)
    assert after is not None and after.state == "resolved" and after.outcome is not None
    assert after.outcome.decided_at == 2.0 and after.requested_at == 1.0 and after.expires_at == 61.0


async def test_a_settlement_on_one_daemon_answers_a_long_poll_on_another(two: tuple[Inbox, Inbox]) -> None:
    a, b = two
    heard: list[tuple[str, str]] = []
    a.listen(lambda kind, rec: heard.append((kind, rec.id)), every_daemon=True)
    across = Across(a)
    await across.start()
    try:
        rec, _ = await b.submit(parse_submission(request_body("s")), 1.0, 60)
        waiting = asyncio.create_task(a.wait_settled(rec.id, 30))
        await asyncio.sleep(0.2)  # the long-poll is waiting (its record read pending)
        assert not waiting.done()
        await b.settle(rec.id, Settlement(option_id="allow_once", by="@x:y", via=Via.MATRIX, now=2.0))
        got = await asyncio.wait_for(waiting, 10)  # woken by the NOTIFY, long before its 30 s
        assert got is not None and got.state == "resolved"
        own, _ = await a.submit(parse_submission(request_body("t")), 3.0, 60)  # told here at once, not twice
        await b.settle(own.id, Settlement(option_id=None, by="@x:y", via=Via.MATRIX, now=4.0))
        for _ in range(100):
            if ("resolved", own.id) in heard:
                break
            await asyncio.sleep(0.05)
        assert heard == [("request", rec.id), ("resolved", rec.id), ("request", own.id), ("resolved", own.id)]
    finally:
        await across.stop()


async def test_a_request_held_on_one_daemon_is_not_posted_by_another_until_released(two: tuple[Inbox, Inbox]) -> None:
    """The standby's API takes a request and applies its rules: the leader (another daemon) must not post it
    meanwhile; once released, it does. A hold whose daemon died lapses after HOLD_LAPSE."""
    standby, leader = two
    across, woken = Across(leader), asyncio.Event()
    leader.on_release(woken.set)
    await across.start()
    try:
        held, _ = await standby.submit(parse_submission(request_body("held")), 100.0, 600, hold_post=True)
        assert await leader.needing_post() == []
        assert [r.id for r in await leader.needing_post(held_before=100.5)] == [held.id]  # lapsed: its daemon died
        await standby.release_post(held.id)
        async with asyncio.timeout(30):  # a guard only: the release wakes the leader's poster
            await woken.wait()
        assert [r.id for r in await leader.needing_post()] == [held.id]
    finally:
        await across.stop()


async def test_a_deposed_leaders_fenced_writes_are_refused_and_the_apis_are_not(two: tuple[Inbox, Inbox]) -> None:
    """The Matrix side's context carries the term: after another daemon took over, its settle is refused
    (and its term marked lost) while the same daemon's API writes (no fence) still go through."""
    a, b = two
    await LEADERSHIP.upgrade(a.database)
    rec, _ = await a.submit(parse_submission(request_body("fenced")), 1.0, 600)
    other, _ = await a.submit(parse_submission(request_body("fenced", tool_call_id="c2")), 1.0, 600)
    await a.database.execute("UPDATE leadership SET term=2 WHERE id=1")  # another daemon took over (term 2)
    fence = Fence(1)

    async def matrix_side() -> None:
        FENCE.set(fence)
        await a.settle(rec.id, Settlement(option_id="allow_once", by="@alice:hs", via=Via.MATRIX, now=2.0))

    with pytest.raises(Deposed):
        await asyncio.create_task(matrix_side())
    assert fence.lost.is_set()
    with pytest.raises(Deposed):
        await confirm_in(a, fence)  # and so is a send (Sender.guard)
    got = await b.get(rec.id)
    assert got is not None and got.pending
    settled = await a.settle(other.id, Settlement(option_id="allow_once", by="api:d", via=Via.API, now=2.0))
    assert settled is not None and not settled.pending
    current = Fence(2)

    async def new_leader() -> None:
        FENCE.set(current)
        await b.settle(rec.id, Settlement(option_id="allow_once", by="@alice:hs", via=Via.MATRIX, now=3.0))

    await asyncio.create_task(new_leader())
    got = await a.get(rec.id)
    assert got is not None and got.outcome is not None and got.outcome.answered_by == "@alice:hs"


async def confirm_in(inbox: Inbox, fence: Fence) -> None:
    async def check() -> None:
        FENCE.set(fence)
        await confirm(inbox.database)

    await asyncio.create_task(check())
