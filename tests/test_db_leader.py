"""Leadership on a real PostgreSQL: two daemons contend; the holder's connection dies or it is paused,
the other takes over with a higher term, and the old holder's writes with its old term are refused."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from bot.inbox.db import Database, create
from bot.inbox.db.leader import LEADERSHIP, Deposed, Holder, Leader, is_stale
from bot.inbox.db.postgres import PostgresDatabase
from tests.support.postgres import check_term, daemons_on

DRIVER_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, ConnectionError)
GUARD = 30  # seconds: only so a broken take-over fails instead of hanging the run


@pytest.fixture
async def daemons(pg_url: str) -> AsyncIterator[list[PostgresDatabase]]:
    async with daemons_on(pg_url, "daemon-a", "daemon-b") as dbs:
        await LEADERSHIP.upgrade(dbs[0])
        await dbs[0].execute("CREATE TABLE posts (body TEXT NOT NULL, term INTEGER NOT NULL)")
        yield dbs


async def until_someone_waits_for_the_lock(db: Database) -> None:
    """Until a standby is seen waiting for the leadership lock (it is then really contending)."""
    sql = "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype='advisory' AND NOT granted)"
    while not await db.fetchval(sql):
        await asyncio.sleep(0.02)


async def post(db: Database, body: str, term: int) -> None:
    """A leader's write: the term checked in the same transaction."""
    async with db.transaction() as conn:
        await check_term(conn, term)
        await conn.execute("INSERT INTO posts (body, term) VALUES ($1, $2)", body, term)


async def bodies(db: Database) -> list[str]:
    return [r["body"] for r in await db.fetch("SELECT body FROM posts ORDER BY body")]


async def test_when_the_leaders_connection_dies_the_standby_takes_over(daemons: list[PostgresDatabase]) -> None:
    a, b = daemons
    la, lb = Leader(a, poll=0.1), Leader(b, stale_after=3600, poll=0.1)  # b waits for the lock alone
    async with asyncio.timeout(GUARD):
        assert await la.campaign() == 1
        await la.beat()
        standby = asyncio.create_task(lb.campaign())
        await until_someone_waits_for_the_lock(a)
        assert not standby.done()
        la._conn.terminate()  # the leader's own connection dies (a crash, a lost network)
        assert await standby == 2
    with pytest.raises(Deposed):
        await la.beat()
    assert la.lost.is_set() and la.term is None
    await lb.beat()
    await post(b, "from b", 2)
    with pytest.raises(Deposed):
        await post(a, "from a, deposed", 1)
    assert await bodies(a) == ["from b"]
    row = await a.fetchrow("SELECT term, holder FROM leadership")
    assert row is not None and (row["term"], row["holder"]) == (2, "daemon-b")
    await lb.resign()


async def test_a_paused_leader_is_ended_and_its_old_term_refused(daemons: list[PostgresDatabase]) -> None:
    """The leader stops beating (SIGSTOP): the standby ends its backend and takes over; when the old
    leader comes back, its writes carry the old term and are refused."""
    a, b = daemons
    la, lb = Leader(a, poll=0.1), Leader(b, stale_after=0.3, poll=0.1)
    async with asyncio.timeout(GUARD):
        assert await la.campaign() == 1
        await post(a, "a while leading", 1)
        # a is paused from here on: no beat
        assert await lb.campaign() == 2
    with pytest.raises(Deposed):
        await post(a, "a after waking", 1)
    with pytest.raises(Deposed):
        await la.beat()  # its leadership connection was ended
    await post(b, "b leading", 2)
    assert await bodies(a) == ["a while leading", "b leading"]
    await lb.resign()


async def test_a_write_in_flight_when_paused_never_commits_after_the_take_over(
    daemons: list[PostgresDatabase],
) -> None:
    """The leader is paused inside a fenced write (its row lock taken): the take-over ends that daemon's
    backends, raises the term, and the write is lost with its transaction, never committed late."""
    a, b = daemons
    la, lb = Leader(a, poll=0.1), Leader(b, stale_after=0.3, poll=0.1)
    inside, wake = asyncio.Event(), asyncio.Event()

    async def paused_write() -> None:
        async with a.transaction() as conn:
            await check_term(conn, 1)
            await conn.execute("INSERT INTO posts (body, term) VALUES ('late', 1)")
            inside.set()
            await wake.wait()

    async with asyncio.timeout(GUARD):
        assert await la.campaign() == 1
        writer = asyncio.create_task(paused_write())
        await inside.wait()
        assert await lb.campaign() == 2
        wake.set()
        with pytest.raises(DRIVER_ERRORS):  # its connection was ended under it
            await writer
    assert await bodies(b) == []
    await lb.resign()


async def test_a_resigning_leader_hands_over_at_once(daemons: list[PostgresDatabase]) -> None:
    a, b = daemons
    la, lb = Leader(a, poll=0.1), Leader(b, stale_after=3600, poll=0.1)
    async with asyncio.timeout(GUARD):
        assert await la.campaign() == 1
        standby = asyncio.create_task(lb.campaign())
        await until_someone_waits_for_the_lock(a)
        await la.resign()
        assert await standby == 2
    row = await b.fetchrow("SELECT term, holder, heartbeat FROM leadership")
    assert row is not None and (row["term"], row["holder"]) == (2, "daemon-b") and row["heartbeat"] is not None
    await lb.resign()


async def test_the_term_check_works_on_sqlite_too(tmp_path: object) -> None:
    db = create(f"sqlite:{tmp_path}/inbox.sqlite3")
    await db.start()
    try:
        await LEADERSHIP.upgrade(db)
        async with db.transaction() as conn:
            await check_term(conn, 0)
        with pytest.raises(Deposed):
            async with db.transaction() as conn:
                await check_term(conn, 1)
    finally:
        await db.stop()


def test_staleness() -> None:
    assert not is_stale(None, 5)
    assert not is_stale(Holder(1, "a", True, None), 5)
    assert not is_stale(Holder(1, "a", True, 4.9), 5)
    assert is_stale(Holder(1, "a", True, 5.1), 5)
    assert is_stale(Holder(1, None, False, 6.0), 5)  # a take-over that stalled
