"""The inbox's connections run each call on the event loop's thread (bot/inbox/connection.py).

This pins what the replacement relies on in aiosqlite: every call, a statement, a fetch, a
commit, a cursor's own methods, goes through ``Connection._execute``. If aiosqlite changes
that, these tests fail, not the daemon's latency quietly.
"""

from __future__ import annotations

import threading
from pathlib import Path

import aiosqlite

from bot.inbox.connection import InlineConnection, connect
from bot.inbox.store import Inbox


async def test_every_call_runs_on_the_loop_thread(tmp_path: Path) -> None:
    db = await connect(tmp_path / "x.sqlite3", isolation_level=None)
    try:
        assert isinstance(db, InlineConnection) and isinstance(db, aiosqlite.Connection)
        db._conn.create_function("tid", 0, threading.get_ident)
        await db.execute("CREATE TABLE t (a)")
        await db.execute("BEGIN")
        await db.execute("INSERT INTO t VALUES (1)")
        await db.commit()
        async with db.execute("SELECT tid(), a FROM t") as cur:
            row = await cur.fetchone()
        assert row is not None and row[0] == threading.get_ident() and row[1] == 1
        cur = await db.execute("SELECT tid()")
        assert (await cur.fetchall())[0][0] == threading.get_ident()
        await cur.close()
    finally:
        await db.close()
    assert not db._thread.is_alive() or db._thread.join(5) is None
    assert not db._thread.is_alive(), "aiosqlite's thread did not stop at close"


async def test_calls_go_through_execute(tmp_path: Path) -> None:
    calls: list[str] = []

    class Counting(InlineConnection):
        async def _execute(self, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
            calls.append(getattr(fn, "__name__", repr(fn)))
            return await super()._execute(fn, *args, **kwargs)

    import sqlite3

    db = await Counting(lambda: sqlite3.connect(str(tmp_path / "y.sqlite3"), check_same_thread=False), 64)
    try:
        cur = await db.execute("SELECT 1")
        await cur.fetchone()
        await cur.fetchall()
        await cur.close()
        await db.commit()
    finally:
        await db.close()
    assert calls[:5] == ["execute", "fetchone", "fetchall", "close", "commit"], calls


async def test_a_closed_inbox_connection_refuses_calls(tmp_path: Path) -> None:
    inbox = Inbox(tmp_path / "inbox.sqlite3")
    await inbox.open()
    db = inbox.db.writer.raw  # type: ignore[attr-defined]
    await inbox.close()
    try:
        await db.execute("SELECT 1")
    except ValueError as e:
        assert "closed" in str(e).lower() or "no active connection" in str(e)
    else:
        raise AssertionError("a closed connection ran a statement")
