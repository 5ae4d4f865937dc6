"""The database lost for a while, on real PostgreSQL servers of the test's own (issue 36): a primary and its
synchronous streaming replica, both named in one two-host URL. The primary restarted: the leader keeps its
term (the standby does not take over), the listener comes back and says so, a write during the outage fails
with a "not now" error and /healthz's reason is set, then cleared. The primary killed and the replica
promoted: the same leader carries on with the same term on the new primary, and the pool writes there.
A primary that stops answering without closing anything (every server process stopped: a black hole) holds
no call forever: a read, a write and the leader's beat fail "not now" within the timeouts, and go on after.
(A notification sent while the listener was away may be missed: it says so with ``on_gap``.) A leader that
never comes back is replaced once the standby's grace is over; no writable host at start is exit 2."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.inbox.db import create, postgres
from bot.inbox.db.errors import DATABASE_ERRORS
from bot.inbox.db.leader import LEADERSHIP, Deposed, Leader
from bot.inbox.db.notify import SETTLED, Listener, notify
from bot.inbox.db.postgres import PostgresDatabase
from tests.support.pg_replica import Pair, replicated, restart, signal_server, stop_immediately
from tests.support.postgres import APP_PASSWORD, APP_ROLE, check_term

GUARD = 60


@pytest.fixture(scope="module")
def pair() -> AsyncIterator[Pair]:
    p = Pair()
    try:
        yield p  # type: ignore[misc]
    finally:
        p.stop()


async def open_db(url: str, holder: str) -> PostgresDatabase:
    db = create(url, holder=holder)
    assert isinstance(db, PostgresDatabase)
    await db.start()
    return db


async def write(db: PostgresDatabase, body: str, term: int) -> None:
    async with db.transaction() as conn:
        await check_term(conn, term)
        await conn.execute("INSERT INTO posts (body) VALUES ($1)", body)
        await notify(conn, SETTLED, body)


async def beat_until_deposed(leader: Leader, every: float) -> None:
    """Beat every ``every`` seconds until deposed, as the daemon's leadership loop does (bot.service.leadership)."""
    with contextlib.suppress(Deposed):
        while True:
            await leader.beat()
            await asyncio.sleep(every)


async def until_written(db: PostgresDatabase, body: str, term: int) -> int:
    """Retry a write as the daemon's loops do (a 'not now' error: try again); the failures seen first."""
    failures = 0
    while True:
        try:
            await write(db, body, term)
            return failures
        except DATABASE_ERRORS:
            failures += 1
            await asyncio.sleep(0.2)


def test_no_writable_host_at_start_is_one_config_line_and_exit_2(pair: Pair, tmp_path: Path) -> None:
    """Two hosts named, one down and the other a read-only standby: nothing to start on (exit 2)."""
    url = (f"postgresql://{APP_ROLE}:{APP_PASSWORD}@127.0.0.1:1,127.0.0.1:{pair.replica.port}/postgres"
           "?target_session_attrs=read-write")
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        '[matrix]\nhomeserver = "http://127.0.0.1:9"\nuser_id = "@b:x"\npassword = "x"\nroom = "!r:x"\n'
        f'[answerers]\nusers = ["@a:x"]\n[api]\nlisten = "127.0.0.1:1"\ntoken = "t"\n[state]\npath = "{tmp_path}"\n'
        f'database = "{url}"\n'
    )
    r = subprocess.run([sys.executable, "-m", "bot", "run", "--config", str(cfg)], capture_output=True, text=True,
                       timeout=60, env={"PATH": "/usr/bin:/bin"})
    lines = [ln for ln in r.stderr.splitlines() if "state.database" in ln]
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert APP_PASSWORD not in r.stderr + r.stdout


async def test_a_leader_lost_with_the_database_is_replaced_after_the_grace(pair: Pair) -> None:
    """The leader does not come back after a restart (it died meanwhile): the standby, back first, leaves
    the lock to it for ``stale_after`` seconds, then takes over; the old leader, if it ever beats, is deposed."""
    url = await pair.create_database()
    a, b = await open_db(url, "gone-a"), await open_db(url, "gone-b")
    la, lb = Leader(a, poll=0.2), Leader(b, stale_after=2.0, poll=0.2)
    standby: asyncio.Task[int] | None = None
    try:
        async with asyncio.timeout(GUARD):
            await LEADERSHIP.upgrade(a)
            assert await la.campaign() == 1
            await la.beat()
            standby = asyncio.create_task(lb.campaign())
            await asyncio.sleep(0.5)
            await asyncio.to_thread(restart, pair.primary, 1.0)
            back = time.monotonic()
            assert await standby == 2  # la never beats again: b takes over once its grace is over
            assert time.monotonic() - back >= 1.0, "taken over before the leader had its chance"
            with pytest.raises(Deposed):
                await la.beat()
            assert la.lost.is_set()
            await lb.resign()
    finally:
        if standby is not None:
            standby.cancel()
            await asyncio.gather(standby, return_exceptions=True)
        await a.stop()
        await b.stop()


def nothing_unretrieved(caplog: pytest.LogCaptureFixture) -> None:
    """No future or task of the database's side ended with an exception nobody read (asyncio says so at GC)."""
    gc.collect()
    said = [r.getMessage() for r in caplog.records if "never retrieved" in r.getMessage() or r.exc_info]
    assert not said, said


async def test_a_primary_that_stops_answering_holds_no_call_forever(
    pair: Pair, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("bot.inbox.db.postgres.COMMAND_TIMEOUT", 1.0)  # the mechanism, not the figures: fast
    monkeypatch.setattr("bot.inbox.db.postgres.CONNECT_TIMEOUT", 1.0)
    url = await pair.create_database()
    db = await open_db(url, "frozen")
    leader = Leader(db, poll=0.2)
    beat: asyncio.Task[None] | None = None
    try:
        async with asyncio.timeout(GUARD):
            await LEADERSHIP.upgrade(db)
            assert await leader.campaign() == 1
            async with db.pool.acquire() as pooled:  # a host that vanished is noticed on an idle connection too
                for conn in (pooled, leader._conn):
                    sock = conn._transport.get_extra_info("socket")
                    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
                    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == postgres.IDLE
            signal_server(pair.primary, signal.SIGSTOP)
            try:
                beat = asyncio.create_task(leader.beat())
                for call in (lambda: db.fetchval("SELECT 1"), lambda: db.execute("UPDATE leadership SET id=1")):
                    t0 = time.monotonic()
                    with pytest.raises(DATABASE_ERRORS):
                        await call()
                    assert time.monotonic() - t0 < 4, "a call waited on a server that does not answer"
                assert db.unreachable is not None
                await asyncio.sleep(1.5)
                assert not beat.done()  # the beat retries (it never hangs on the old connection): no deposition
            finally:
                signal_server(pair.primary, signal.SIGCONT)
            await beat  # back: the same term goes on
            assert leader.term == 1 and not leader.lost.is_set()
            assert await db.fetchval("SELECT term FROM leadership") == 1
            await leader.resign()
            nothing_unretrieved(caplog)
    finally:
        signal_server(pair.primary, signal.SIGCONT)  # whatever happened above: never leave a server stopped
        if beat is not None:
            beat.cancel()
            await asyncio.gather(beat, return_exceptions=True)
        await db.stop()


async def test_a_schema_step_or_a_migration_is_not_cut_by_the_statement_limit(
    pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-statement limit tells a dead server from a slow one; a long ALTER on a large database is the
    latter: ``allow_slow`` (schema steps, ``state migrate``) lifts it for that connection only. (Before the
    promotion test: it needs the first primary.)"""
    monkeypatch.setattr("bot.inbox.db.postgres.COMMAND_TIMEOUT", 0.3)
    db = await open_db(await pair.create_database(), "slow")
    try:
        async with asyncio.timeout(GUARD):
            with pytest.raises(DATABASE_ERRORS):
                await db.fetchval("SELECT pg_sleep(0.8)")
            async with db.transaction() as conn:
                conn.allow_slow()
                await conn.execute("SELECT pg_sleep(0.8)")
            with pytest.raises(DATABASE_ERRORS):  # the next transaction has the limit again
                await db.fetchval("SELECT pg_sleep(0.8)")
    finally:
        await db.stop()


async def test_a_restart_then_a_promotion_depose_no_one(pair: Pair, caplog: pytest.LogCaptureFixture) -> None:
    url = await pair.create_database()
    assert "target_session_attrs" not in url and "," in url  # two hosts: read-write by default
    a, b = await open_db(url, "outage-a"), await open_db(url, "outage-b")
    await LEADERSHIP.upgrade(a)
    await a.execute("CREATE TABLE posts (body TEXT NOT NULL)")
    la, lb = Leader(a, poll=0.2), Leader(b, poll=0.2)
    heard: asyncio.Queue[str] = asyncio.Queue()
    gaps: list[int] = []
    listener = Listener(a, SETTLED, heard.put_nowait, lambda: gaps.append(1))
    tasks: list[asyncio.Task[object]] = []
    try:
        async with asyncio.timeout(GUARD):
            assert await la.campaign() == 1
            await listener.start()
            beating = asyncio.create_task(beat_until_deposed(la, 0.2))
            standby = asyncio.create_task(lb.campaign())
            tasks += [beating, standby]
            await write(a, "before", 1)
            assert await heard.get() == "before"

            down = asyncio.create_task(asyncio.to_thread(restart, pair.primary, 3.0))
            while a.unreachable is None:  # /healthz's reason: the beat or a read saw the loss
                await asyncio.sleep(0.05)
            assert await until_written(a, "during restart", 1) > 0  # refused while down, then taken
            await down
            while not gaps:  # the listener is back and says ids may have been missed meanwhile
                await asyncio.sleep(0.05)
            await write(a, "heard", 1)
            while await heard.get() != "heard":
                pass
            await asyncio.sleep(1.5)  # the standby is back too: it must not have taken over
            assert not standby.done() and not beating.done() and la.term == 1 and not la.lost.is_set()
            assert a.unreachable is None
            while not replicated(pair):
                await asyncio.sleep(0.1)

            stop_immediately(pair.primary)
            await asyncio.to_thread(pair.replica.promote)
            assert await until_written(a, "after promotion", 1) >= 0
            await asyncio.sleep(1.5)
            assert not standby.done() and not beating.done() and la.term == 1
            assert [r["body"] for r in await b.fetch("SELECT body FROM posts ORDER BY body")] == [
                "after promotion", "before", "during restart", "heard"]
            assert await b.fetchval("SELECT term FROM leadership") == 1
            await la.resign()
            assert await standby == 2  # a resignation still hands over at once, on the new primary
            await lb.resign()
            nothing_unretrieved(caplog)
    finally:
        await listener.stop()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await a.stop()
        await b.stop()

