"""The one database interface the inbox speaks, whatever the engine (mautrix-python's ``async_db`` shape).

``Connection``: ``execute`` (rows affected), ``fetch``, ``fetchrow``, ``fetchval``, all with shared SQL
(``$1`` placeholders, :mod:`bot.inbox.db.dialect`). Rows are read by column name (or index).
``Database``: the same calls outside a transaction (reads see only what is committed; a lone write is
its own transaction), and ``transaction()``, one write transaction on one connection, which a nested
``transaction()`` in the same task joins. A transaction opened by a Matrix-side task first checks the
leader's fencing term (:mod:`bot.inbox.db.fence`).
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

from bot.inbox.db import fence
from bot.inbox.db.dialect import Dialect, split_statements
from bot.inbox.db.url import Target


class Row(Protocol):
    """A result row (``sqlite3.Row`` or ``asyncpg.Record``): ``row["column"]`` or ``row[0]``."""

    def __getitem__(self, key: int | str, /) -> Any: ...

    def keys(self) -> Iterable[str]: ...


def placeholders(first: int, count: int) -> str:
    """``count`` numbered placeholders from ``$first`` (``$3,$4,$5``): the inside of an ``IN (...)`` list."""
    return ",".join(f"${first + i}" for i in range(count))


class DatabaseError(Exception):
    """The database cannot be reached or used (the message names ``state.database``, never a password)."""


class Fetching(ABC):
    """``fetchrow`` and ``fetchval`` over ``fetch``: a connection's and a database's alike."""

    dialect: Dialect

    @abstractmethod
    async def execute(self, sql: str, *args: Any) -> int:
        """Run a statement; the number of rows it changed (0 for DDL)."""

    @abstractmethod
    async def fetch(self, sql: str, *args: Any) -> Sequence[Row]:
        """Every row of a query."""

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        """The first row, or None."""
        rows = await self.fetch(sql, *args)
        return rows[0] if rows else None

    async def fetchval(self, sql: str, *args: Any) -> Any:
        """One value of the first row, or None."""
        rows = await self.fetch(sql, *args)
        return rows[0][0] if rows else None


class Connection(Fetching):
    """One connection (in a transaction when got from ``Database.transaction``)."""

    def allow_slow(self) -> None:
        """Lift the per-statement time limit for the rest of this connection's use (schema steps and
        ``state migrate``: a long ``ALTER TABLE`` on a large database is work, not a dead server); SQLite has none."""
        return None

    async def script(self, script: str) -> None:
        """Run each statement of ``script`` (cut at top-level ``;``), no arguments."""
        for stmt in split_statements(script):
            await self.execute(stmt)


class Database(Fetching):
    """A database behind one interface; see the module docstring."""

    target: Target

    def __init__(self, target: Target) -> None:
        self.target = target
        # (owning task, its open transaction): a task spawned inside inherits the variable but not the transaction
        self._current: contextvars.ContextVar[tuple[object, Connection] | None] = contextvars.ContextVar(
            f"db_txn_{id(self)}", default=None
        )
        self._fixed_reader: Connection | None = None  # SQLite: its one read connection, used without a wrapper
        self.unreachable: tuple[float, str] | None = None  # (since, why): the database is lost for now

    def note_unreachable(self, e: BaseException) -> None:
        """A connection to the database was lost or refused (``/healthz`` says so until one succeeds)."""
        since = self.unreachable[0] if self.unreachable is not None else time.time()
        self.unreachable = (since, f"{type(e).__name__}: {e}"[:200])

    @abstractmethod
    async def start(self) -> None:
        """Open the connections (no schema work: see ``bot.inbox.db.upgrade``)."""

    @abstractmethod
    async def stop(self) -> None:
        """Close every connection."""

    @abstractmethod
    def _begin(self) -> AbstractAsyncContextManager[Connection]:
        """One write transaction on one connection (committed at the end, rolled back on an error)."""

    @abstractmethod
    def _reader(self) -> AbstractAsyncContextManager[Connection]:
        """A connection for one committed read."""

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Connection]:
        """One write transaction; inside one already (this task), the same one."""
        current = self._own()
        if current is not None:
            yield current
            return
        term = fence.FENCE.get()  # the Matrix side's writes: still this daemon's term (PostgreSQL)
        async with self._begin() if term is None else self._begin_fenced(term) as conn:
            token = self._current.set((asyncio.current_task(), conn))
            try:
                yield conn
            finally:
                self._current.reset(token)

    @asynccontextmanager
    async def _begin_fenced(self, term: fence.Fence) -> AsyncIterator[Connection]:
        """A write transaction that first checks ``leader_term``, this context's fence (:func:`fence.check`);
        PostgreSQL does both in one round trip."""
        async with self._begin() as conn:
            await fence.check(conn)
            yield conn

    def in_transaction(self) -> bool:
        """Whether this task has a transaction open (what it reads then is read inside it)."""
        return self._own() is not None

    def _own(self) -> Connection | None:
        """The transaction this task has open, if any."""
        current = self._current.get()
        return current[1] if current is not None and current[0] is asyncio.current_task() else None

    async def execute(self, sql: str, *args: Any) -> int:
        async with self.transaction() as conn:
            return await conn.execute(sql, *args)

    async def fetch(self, sql: str, *args: Any) -> Sequence[Row]:
        conn = self._own() or self._fixed_reader  # the hot path: no context manager to enter
        if conn is not None:
            return await conn.fetch(sql, *args)
        async with self._reader() as conn:
            return await conn.fetch(sql, *args)

    async def table_exists(self, name: str) -> bool:
        """Whether a table ``name`` exists (in the current schema on PostgreSQL)."""
        if self.dialect.is_postgres:
            sql = "SELECT to_regclass($1) IS NOT NULL"
        else:
            sql = "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type='table' AND name=$1)"
        return bool(await self.fetchval(sql, name))
