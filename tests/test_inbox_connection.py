"""The inbox's SQLite connections make each call inline, on the event loop's thread (bot/inbox/db/sqlite.py)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from bot.inbox.db.sqlite import SqliteConnection, connect
from bot.inbox.store import Inbox


async def test_every_call_runs_on_the_loop_thread(tmp_path: Path) -> None:
    raw = connect(tmp_path / "x.sqlite3")
    raw.create_function("tid", 0, threading.get_ident)
    db = SqliteConnection(raw)
    try:
        await db.execute("CREATE TABLE t (a)")
        assert await db.execute("INSERT INTO t VALUES (1), (2)") == 2
        rows = await db.fetch("SELECT tid(), a FROM t ORDER BY a")
        assert [(r[0], r["a"]) for r in rows] == [(threading.get_ident(), 1), (threading.get_ident(), 2)]
    finally:
        raw.close()


async def test_a_closed_inbox_connection_refuses_calls(sqlite_inbox: Inbox) -> None:
    db = sqlite_inbox.database.writer  # type: ignore[attr-defined]
    await sqlite_inbox.close()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        await db.execute("SELECT 1")
