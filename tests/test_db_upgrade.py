"""Versioned schema steps on both engines: in order, once, each step whole or not at all, a newer
database refused, a legacy version adopted, and two daemons upgrading one PostgreSQL database at once."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.inbox.db import Connection, Database, SchemaTooNew, Step, UpgradeTable, both, create

STEPS = [
    both("notes", "CREATE TABLE notes ({ROWID} id {SERIAL_PK}, body TEXT NOT NULL, at {REAL})"),
    Step(
        "a tag per note",
        "ALTER TABLE notes ADD COLUMN tag TEXT; CREATE INDEX notes_tag ON notes (tag)",
        "ALTER TABLE notes ADD COLUMN tag TEXT; CREATE INDEX notes_tag ON notes (tag) WHERE tag IS NOT NULL",
    ),
]


async def _count_run(conn: Connection) -> None:
    await conn.execute("INSERT INTO notes (body) VALUES ('step 3 ran')")


@pytest.fixture
async def db(engine_url: str) -> AsyncIterator[Database]:
    d = create(engine_url, holder="upgrade")
    await d.start()
    yield d
    await d.stop()


async def test_steps_run_in_order_once(db: Database) -> None:
    table = UpgradeTable("notes", STEPS)
    assert await table.upgrade(db) == 2
    assert await db.fetchval("SELECT version FROM schema_versions WHERE name='notes'") == 2
    await db.execute("INSERT INTO notes (body, tag, at) VALUES ('a', 't', 1.5)")
    more = UpgradeTable("notes", [*STEPS, Step("count", _count_run, _count_run)])
    assert await more.upgrade(db) == 3
    assert await more.upgrade(db) == 3  # nothing left: the function step does not run again
    assert await db.fetchval("SELECT COUNT(*) FROM notes WHERE body='step 3 ran'") == 1


async def test_tables_of_steps_keep_their_own_versions(db: Database) -> None:
    await UpgradeTable("notes", STEPS).upgrade(db)
    other = UpgradeTable("other", [both("o", "CREATE TABLE other (x TEXT)")])
    assert await other.upgrade(db) == 1
    rows = await db.fetch("SELECT name, version FROM schema_versions ORDER BY name")
    assert [(r["name"], r["version"]) for r in rows] == [("notes", 2), ("other", 1)]


async def test_a_database_newer_than_the_code_is_refused(db: Database) -> None:
    await UpgradeTable("notes", STEPS).upgrade(db)
    with pytest.raises(SchemaTooNew) as e:
        await UpgradeTable("notes", STEPS[:1]).upgrade(db, where="state.database")
    assert str(e.value).startswith("state.database: the notes schema is at version 2, newer than")


async def test_a_failing_step_leaves_nothing_behind(db: Database) -> None:
    async def half_then_fail(conn: Connection) -> None:
        await conn.execute("CREATE TABLE half (x TEXT)")
        raise RuntimeError("step failed")

    table = UpgradeTable("notes", [*STEPS, Step("fails", half_then_fail, half_then_fail)])
    with pytest.raises(RuntimeError):
        await table.upgrade(db)
    assert await db.fetchval("SELECT version FROM schema_versions WHERE name='notes'") == 2
    assert not await db.table_exists("half")  # DDL is transactional on both engines


async def test_a_legacy_version_is_adopted(tmp_path: Path) -> None:
    """A SQLite inbox versioned with PRAGMA user_version before schema_versions existed goes on from there."""
    path = tmp_path / "old.sqlite3"
    old = sqlite3.connect(path)
    old.executescript("CREATE TABLE notes (id INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL, at REAL);"
                      "PRAGMA user_version = 1;")
    old.close()

    async def user_version(conn: Connection) -> int:
        return int(await conn.fetchval("PRAGMA user_version"))

    db = create(f"sqlite:{path}")
    await db.start()
    try:
        assert await UpgradeTable("notes", STEPS, legacy=user_version).upgrade(db) == 2
        assert await db.fetchval("SELECT version FROM schema_versions WHERE name='notes'") == 2
    finally:
        await db.stop()


async def test_two_daemons_upgrading_at_once_run_each_step_once(pg_url: str) -> None:
    dbs = [create(pg_url, holder=f"d{i}") for i in range(3)]
    for d in dbs:
        await d.start()
    try:
        table = UpgradeTable("notes", [*STEPS, Step("count", _count_run, _count_run)])
        assert await asyncio.gather(*(table.upgrade(d) for d in dbs)) == [3, 3, 3]
        assert await dbs[0].fetchval("SELECT COUNT(*) FROM notes WHERE body='step 3 ran'") == 1
    finally:
        for d in dbs:
            await d.stop()
