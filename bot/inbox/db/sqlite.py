"""The SQLite engine: one writer and one read-only connection (WAL), every call inline on the loop's thread.

As the inbox does today (:mod:`bot.inbox.connection`): aiosqlite's API, calls made where they are asked
(tens of microseconds each), writes one ``BEGIN IMMEDIATE`` transaction at a time under an asyncio lock,
reads on their own connection, so they see only what is committed. The PRAGMAs live here, not in
shared SQL.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, cast

import aiosqlite

from bot.inbox.connection import connect
from bot.inbox.db.base import Connection, Database, DatabaseError, Row
from bot.inbox.db.dialect import SQLITE
from bot.inbox.db.url import Target

PRAGMAS = ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA busy_timeout=5000")


class SqliteConnection(Connection):
    """An aiosqlite connection speaking shared SQL."""

    dialect = SQLITE

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self.raw = conn

    async def execute(self, sql: str, *args: Any) -> int:
        async with self.raw.execute(SQLITE.sql(sql), args) as cur:
            return max(cur.rowcount, 0)

    async def fetch(self, sql: str, *args: Any) -> Sequence[Row]:
        async with self.raw.execute(SQLITE.sql(sql), args) as cur:
            return cast(Sequence[Row], await cur.fetchall())  # aiosqlite's fetchall gives sqlite3's list


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
        self._read: SqliteConnection | None = None

    async def start(self) -> None:
        try:
            if not self.read_only:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                raw = await connect(self.path, isolation_level=None)
                raw.row_factory = sqlite3.Row
                for pragma in PRAGMAS:
                    await raw.execute(pragma)
                self._writer = SqliteConnection(raw)
            reader = await connect(self.path.resolve().as_uri() + "?mode=ro", uri=True, isolation_level=None)
            reader.row_factory = sqlite3.Row
            await reader.execute("PRAGMA busy_timeout=5000")
        except (OSError, sqlite3.Error) as e:
            await self.stop()
            why = f"cannot open {self.path}: {e} -> check its folder's permissions"
            raise DatabaseError(f"{self.target.key}: {why}") from None
        self._read = self._fixed_reader = SqliteConnection(reader)

    async def stop(self) -> None:
        for conn in (self._read, self._writer):
            if conn is not None:
                await conn.raw.close()
        self._read = self._writer = self._fixed_reader = None

    @property
    def writer(self) -> SqliteConnection:
        if self._writer is None:
            raise DatabaseError(f"{self.path}: the database is not open" + (" to write" if self.read_only else ""))
        return self._writer

    @asynccontextmanager
    async def _begin(self) -> AsyncIterator[Connection]:
        async with self._lock:
            conn = self.writer
            await conn.raw.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                await conn.raw.execute("COMMIT")
            except BaseException:
                if conn.raw.in_transaction:  # also when COMMIT itself failed (a full or read-only disk)
                    await conn.raw.execute("ROLLBACK")
                raise

    @asynccontextmanager
    async def _reader(self) -> AsyncIterator[Connection]:
        if self._read is None:
            raise DatabaseError(f"{self.path}: the database is not open")
        yield self._read
