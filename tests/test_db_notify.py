"""LISTEN/NOTIFY of ids on a real PostgreSQL: a committed settlement on one daemon wakes another; a rolled
back one never does; a lost listening connection comes back and says ids may have been missed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from bot.inbox.db import create
from bot.inbox.db.notify import MAX_PAYLOAD, SETTLED, Listener, check_payload, notify
from bot.inbox.db.postgres import PostgresDatabase
from tests.support.postgres import daemons_on

GUARD = 30


@pytest.fixture
async def daemons(pg_url: str) -> AsyncIterator[list[PostgresDatabase]]:
    async with daemons_on(pg_url, "notify-a", "notify-b") as dbs:
        yield dbs


async def test_a_committed_notify_wakes_the_other_daemon(daemons: list[PostgresDatabase]) -> None:
    a, b = daemons
    heard: asyncio.Queue[str] = asyncio.Queue()
    listener = Listener(a, SETTLED, heard.put_nowait)
    await listener.start()
    try:
        async with asyncio.timeout(GUARD):
            with pytest.raises(RuntimeError):
                async with b.transaction() as conn:
                    await notify(conn, SETTLED, "s1:1")
                    raise RuntimeError("rolled back: nobody hears it")
            async with b.transaction() as conn:
                await notify(conn, SETTLED, "s1:2")
            assert await heard.get() == "s1:2"  # notifications arrive in commit order: s1:1 never came
            assert heard.empty()
    finally:
        await listener.stop()


async def test_a_lost_listener_comes_back_and_reports_the_gap(daemons: list[PostgresDatabase]) -> None:
    a, b = daemons
    heard: asyncio.Queue[str] = asyncio.Queue()
    gaps: asyncio.Queue[None] = asyncio.Queue()
    listener = Listener(a, SETTLED, heard.put_nowait, lambda: gaps.put_nowait(None))
    await listener.start()
    try:
        async with asyncio.timeout(GUARD):
            ended = await b.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query LIKE 'LISTEN%'"
                " AND application_name=$1",
                a.tag,
            )
            assert ended == 1
            await gaps.get()
            async with b.transaction() as conn:
                await notify(conn, SETTLED, "s1:3")
            assert await heard.get() == "s1:3"
    finally:
        await listener.stop()


async def test_payloads_are_ids_not_records() -> None:
    assert check_payload("s" * MAX_PAYLOAD) == "s" * MAX_PAYLOAD
    with pytest.raises(ValueError, match="send an id"):
        check_payload("é" * 4000)  # 8000 bytes


async def test_notify_on_sqlite_does_nothing(tmp_path: object) -> None:
    db = create(f"sqlite:{tmp_path}/inbox.sqlite3")
    await db.start()
    try:
        async with db.transaction() as conn:
            await notify(conn, SETTLED, "s1:1")
    finally:
        await db.stop()
