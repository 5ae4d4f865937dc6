"""The one database interface on both engines (a SQLite file, a real PostgreSQL): calls, rows by name,
transactions, committed reads, and the statement forms the inbox uses, run unchanged on each."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from bot.inbox.db import Database, DatabaseError, create
from tests.support.postgres import PgCluster

SCHEMA = """
CREATE TABLE requests ({ROWID} id TEXT PRIMARY KEY, session_id TEXT NOT NULL, state TEXT NOT NULL,
  requested_at {REAL} NOT NULL, outcome_by TEXT);
CREATE TABLE seq (session_id TEXT PRIMARY KEY, last INTEGER NOT NULL);
CREATE TABLE handled (event_id TEXT PRIMARY KEY, at {REAL} NOT NULL);
CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE timeline (pos {SERIAL_PK}, event_id TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, request_id TEXT)
"""


@pytest.fixture
async def db(engine_url: str) -> AsyncIterator[Database]:
    d = create(engine_url, holder="engines")
    await d.start()
    async with d.transaction() as conn:
        await conn.script(conn.dialect.ddl(SCHEMA))
    yield d
    await d.stop()


async def add(db: Database, rid: str, at: float, session: str = "s1") -> None:
    await db.execute(
        "INSERT INTO requests (id, session_id, state, requested_at) VALUES ($1, $2, 'pending', $3)", rid, session, at
    )


async def test_calls_and_rows_by_name(db: Database) -> None:
    assert await db.execute("INSERT INTO kv (k, v) VALUES ($1, $2), ($3, $2)", "a", "x", "b") == 2
    rows = await db.fetch("SELECT k, v FROM kv WHERE v=$1 ORDER BY k", "x")
    assert [(r["k"], r["v"]) for r in rows] == [("a", "x"), ("b", "x")]
    assert [r[0] for r in rows] == ["a", "b"]
    row = await db.fetchrow("SELECT * FROM kv WHERE k=$1", "b")
    assert row is not None and dict(zip(row.keys(), (row[0], row[1]), strict=True)) == {"k": "b", "v": "x"}
    assert await db.fetchrow("SELECT * FROM kv WHERE k=$1", "zz") is None
    assert await db.fetchval("SELECT COUNT(*) FROM kv") == 2
    assert await db.fetchval("SELECT v FROM kv WHERE k=$1", "zz") is None
    assert await db.table_exists("kv") and not await db.table_exists("nope")


async def test_float_times_keep_their_precision(db: Database) -> None:
    await add(db, "s1:1", 1_760_000_000.123456)
    assert await db.fetchval("SELECT requested_at FROM requests") == 1_760_000_000.123456


async def test_a_transaction_commits_or_rolls_back_whole(db: Database) -> None:
    async with db.transaction() as conn:
        await conn.execute("INSERT INTO kv (k, v) VALUES ('a', '1')")
        assert await db.fetchval("SELECT v FROM kv WHERE k='a'") == "1"  # inside: its own write is seen
        async with db.transaction() as inner:  # a nested transaction joins the open one
            assert inner is conn
    with pytest.raises(RuntimeError):
        async with db.transaction() as conn:
            await conn.execute("INSERT INTO kv (k, v) VALUES ('b', '2')")
            raise RuntimeError("boom")
    assert [r["k"] for r in await db.fetch("SELECT k FROM kv")] == ["a"]


async def test_reads_outside_see_only_what_is_committed(db: Database) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def writer() -> None:
        async with db.transaction() as conn:
            await conn.execute("INSERT INTO kv (k, v) VALUES ('w', '1')")
            entered.set()
            await release.wait()

    task = asyncio.create_task(writer())
    await entered.wait()
    assert await db.fetchval("SELECT COUNT(*) FROM kv") == 0
    release.set()
    await task
    assert await db.fetchval("SELECT COUNT(*) FROM kv") == 1


async def test_the_inbox_statement_forms_run_unchanged(db: Database) -> None:
    """The forms of bot/inbox/*.py (placeholders made $n, the alias PostgreSQL needs) on both engines."""
    async with db.transaction() as c:
        seq = [
            await c.fetchval(
                "INSERT INTO seq (session_id, last) VALUES ($1, 1) "
                "ON CONFLICT(session_id) DO UPDATE SET last = seq.last + 1 RETURNING last",  # "last" alone: ambiguous
                "s1",
            )
            for _ in range(3)
        ]
    assert seq == [1, 2, 3]
    # INSERT OR IGNORE: its row count says whether it was new (mark_handled)
    assert await db.execute("INSERT OR IGNORE INTO handled (event_id, at) VALUES ($1, $2)", "$e1", 1.0) == 1
    assert await db.execute("INSERT OR IGNORE INTO handled (event_id, at) VALUES ($1, $2)", "$e1", 2.0) == 0
    # settle: a conditional UPDATE checked by its row count
    await add(db, "s1:1", 10.0)
    settle = "UPDATE requests SET state=$1, outcome_by=$2 WHERE id=$3 AND state=$4"
    assert await db.execute(settle, "resolved", "@alice", "s1:1", "pending") == 1
    assert await db.execute(settle, "resolved", "@bob", "s1:1", "pending") == 0
    # an upsert whose WHERE may refuse the update (Marks.place, mark_settled_at)
    place = (
        "INSERT INTO timeline (event_id, kind, request_id) VALUES ($1, $2, $3) ON CONFLICT(event_id)"
        " DO UPDATE SET kind=excluded.kind, request_id=excluded.request_id WHERE timeline.kind='answer'"
    )
    assert await db.execute(place, "$a", "answer", None) == 1
    assert await db.execute(place, "$a", "settled", "s1:1") == 1
    assert await db.execute(place, "$a", "posted", "s1:2") == 0
    assert await db.fetchval("SELECT kind FROM timeline WHERE event_id=$1", "$a") == "settled"
    # a prefix match, DELETE ... RETURNING, a row-value keyset page, a union over an aliased subquery
    await db.execute("INSERT INTO kv (k, v) VALUES ('acct.a', '1'), ('acct.b', '2'), ('other', '3')")
    rows = await db.fetch("SELECT k FROM kv WHERE substr(k, 1, $1) = $2 ORDER BY k", 5, "acct.")
    assert [r["k"] for r in rows] == ["acct.a", "acct.b"]
    async with db.transaction() as c:
        gone = await c.fetch("DELETE FROM kv WHERE k=$1 RETURNING *", "other")
    assert [(r["k"], r["v"]) for r in gone] == [("other", "3")]
    for i, at in enumerate([20.0, 20.0, 30.0], start=2):
        await add(db, f"s1:{i}", at)
    page = await db.fetch(
        "SELECT rowid AS _key, id FROM requests WHERE state=$1 AND (requested_at, rowid) > ($2, $3)"
        " ORDER BY requested_at, rowid LIMIT $4",
        "pending", 20.0, 0, 10,
    )
    first = await db.fetchval("SELECT rowid FROM requests WHERE id='s1:2'")
    assert [r["id"] for r in page] == ["s1:2", "s1:3", "s1:4"]
    later = await db.fetch(
        "SELECT id FROM requests WHERE state=$1 AND (requested_at, rowid) > ($2, $3) ORDER BY requested_at, rowid",
        "pending", 20.0, first,
    )
    assert [r["id"] for r in later] == ["s1:3", "s1:4"]
    last = "SELECT pos, kind, request_id FROM timeline ORDER BY pos DESC LIMIT 1"
    union = await db.fetch(f"SELECT pos, kind FROM timeline WHERE kind='posted' UNION SELECT pos, kind FROM ({last}) l")
    assert [(r["kind"]) for r in union] == ["settled"]


async def test_one_settle_wins_across_two_daemons(engine_url: str, db: Database) -> None:
    """Two Database objects on one database (two daemons on PostgreSQL): each settles the same requests
    at once; every request is settled exactly once."""
    other = create(engine_url, holder="other")
    await other.start()
    try:
        for i in range(20):
            await add(db, f"s1:{i}", float(i))
        settle = "UPDATE requests SET state='resolved', outcome_by=$1 WHERE id=$2 AND state='pending'"

        async def settle_all(d: Database, who: str) -> int:
            won = 0
            for i in range(20):
                async with d.transaction() as c:
                    won += await c.execute(settle, who, f"s1:{i}")
            return won

        a, b = await asyncio.gather(settle_all(db, "a"), settle_all(other, "b"))
        assert a + b == 20
        assert await db.fetchval("SELECT COUNT(*) FROM requests WHERE state='resolved'") == 20
    finally:
        await other.stop()


async def test_a_bad_password_is_one_line_without_it(pg_cluster: PgCluster) -> None:
    url = pg_cluster.url("postgres", password="wrong-Secret-pw")
    db = create(url)
    with pytest.raises(DatabaseError) as e:
        await db.start()
    msg = str(e.value)
    assert msg.startswith("state.database: cannot connect to postgresql://permbot@127.0.0.1:")  # password dropped
    assert "wrong-Secret-pw" not in msg and "\n" not in msg
    assert "InvalidPasswordError" in msg


async def test_a_refused_connection_is_one_line_without_the_password() -> None:
    from bot.demo.homeserver import free_port

    db = create(f"postgresql://permbot:Secret-pw-9@127.0.0.1:{free_port()}/permbot")
    with pytest.raises(DatabaseError) as e:
        await db.start()
    assert "Secret-pw-9" not in str(e.value) and str(e.value).startswith("state.database: cannot connect to")
