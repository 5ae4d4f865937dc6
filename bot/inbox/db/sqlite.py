"""The SQLite engine: one writer and one read-only connection (WAL), every call inline on the loop's thread.

The standard library's ``sqlite3``, each call made where it is asked: the inbox's statements are small, and with
WAL and ``synchronous=NORMAL`` a commit writes the log without an fsync (only a checkpoint, once per ~4 MB of
log, syncs), so a call costs tens of microseconds. A worker thread per connection (aiosqlite's way) cost two
thread hops and a hand-over of the GIL per call, 0.1-0.5 ms on a busy machine, about ten per settled answer
(``bench/latency.py``: answer seen -> settled 1.4 -> 0.3 ms median, 4.7 -> 0.4 ms p90). The price: a stalled
disk holds up the whole loop, not only the inbox's callers (most of it anyway); a failing one raises at once.
Writes are one ``BEGIN IMMEDIATE`` transaction at a time under an asyncio lock; reads are on their own
connection, so they see only what is committed. The PRAGMAs live here, not in shared SQL.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any, cast

from bot.inbox.db.base import Connection, Database, DatabaseError, Row
from bot.inbox.db.dialect import SQLITE
from bot.inbox.db.url import Target

PRAGMAS = ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA busy_timeout=5000")


class SqliteConnection(Connection):
    """A ``sqlite3`` connection speaking shared SQL, each call made inline."""

    dialect = SQLITE

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.raw = conn

    async def execute(self, sql: str, *args: Any) -> int:
        with closing(self.raw.execute(SQLITE.sql(sql), args)) as cur:
            return max(cur.rowcount, 0)

    async def fetch(self, sql: str, *args: Any) -> Sequence[Row]:
        with closing(self.raw.execute(SQLITE.sql(sql), args)) as cur:
            return cast(Sequence[Row], cur.fetchall())


def connect(database: str | Path, **kwargs: Any) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are the caller's ``BEGIN``) returning ``sqlite3.Row``s."""
    conn: sqlite3.Connection = sqlite3.connect(
        str(database), isolation_level=None, check_same_thread=False, **kwargs
    )
    conn.row_factory = sqlite3.Row
    return conn


class SqliteDatabase(Database):
    """A SQLite file (see the module docstring)."""

    dialect = SQLITE

    def __init__(self, target: Target, *, read_only: bool = False) -> None:
        super().__init__(target)
        assert target.path is not None
        self.path = target.path
        self.read_only = read_only  # the reader only (doctor): no folder made, every write refused
        self._lock = asyncio.Lock()
        self._writer: SqliteConnection | None = None
        self._fixed_reader: SqliteConnection | None = None  # its one read connection

    async def start(self) -> None:
        try:
            if not self.read_only:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                raw = connect(self.path)
                self._writer = SqliteConnection(raw)
                for pragma in PRAGMAS:
                    raw.execute(pragma).close()
            reader = connect(self.path.resolve().as_uri() + "?mode=ro", uri=True)
            self._fixed_reader = SqliteConnection(reader)
            reader.execute("PRAGMA busy_timeout=5000").close()
        except (OSError, sqlite3.Error) as e:
            await self.stop()
            why = f"cannot open {self.path}: {e} -> check its folder's permissions"
            raise DatabaseError(f"{self.target.key}: {why}") from None

    async def stop(self) -> None:
        for conn in (self._fixed_reader, self._writer):
            if conn is not None:
                conn.raw.close()
        self._fixed_reader = self._writer = None

    @property
    def writer(self) -> SqliteConnection:
        if self._writer is None:
            raise DatabaseError(f"{self.path}: the database is not open" + (" to write" if self.read_only else ""))
        return self._writer

    @asynccontextmanager
    async def _begin(self) -> AsyncIterator[Connection]:
        async with self._lock:
            conn = self.writer
            conn.raw.execute("BEGIN IMMEDIATE").close()
            try:
                yield conn
                conn.raw.execute("COMMIT").close()
            except BaseException:
                if conn.raw.in_transaction:  # also when COMMIT itself failed (a full or read-only disk)
                    conn.raw.execute("ROLLBACK").close()
                raise

    @asynccontextmanager
    async def _reader(self) -> AsyncIterator[Connection]:
        if self._fixed_reader is None:
            raise DatabaseError(f"{self.path}: the database is not open")
        yield self._fixed_reader
