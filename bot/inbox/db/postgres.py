"""The PostgreSQL engine, over asyncpg: a pool for the API's reads and the writes, one-off connections for
leadership and LISTEN (:mod:`bot.inbox.db.leader`, :mod:`bot.inbox.db.notify`).

Every connection carries ``application_name`` = :attr:`PostgresDatabase.tag` (``pb:`` + the daemon's
holder id), so a new leader can end a paused one's backends, and ``idle_in_transaction_session_timeout``,
so a paused daemon's open transaction (and the row locks it holds) is ended by the server, and TCP
keepalives (:func:`keep_alive`): a primary that vanished without closing the connection (a host lost, packets
dropped) is noticed by the kernel within :data:`NOTICED_WITHIN` seconds even on an idle connection (the
leadership lock's, the LISTEN one), which then ends with a "not now" error its owner retries; a statement
waiting on such a server ends at asyncpg's ``command_timeout``.
Connection errors name ``state.database`` and the URL with its password masked.
"""

from __future__ import annotations

import contextlib
import re
import socket
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from bot.inbox.db.base import Connection, Database, DatabaseError, Row
from bot.inbox.db.dialect import POSTGRES
from bot.inbox.db.fence import Deposed, Fence
from bot.inbox.db.url import Target, scrub, session_attrs

IDLE_IN_TRANSACTION_MS = 10_000
# a Matrix-side write transaction: its BEGIN and the check of the leader's term (bot.inbox.db.fence) at once
_FENCED_BEGIN = (
    "BEGIN; SELECT 1 / (term = {term})::int FROM leadership WHERE id=1" + POSTGRES.fence_lock()
)  # the same row and lock as fence.check's read
_COUNT = re.compile(r"\s(\d+)$")
CONNECT_ERRORS = (
    OSError, asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, ValueError, TimeoutError
)  # InternalClientError: a connection the server ended mid-call, no host with the target_session_attrs
# a connection lost or refused (the database restarting, failed over, or not the writable primary now)
UNREACHABLE = (
    OSError, TimeoutError, asyncpg.InterfaceError, asyncpg.InternalClientError, asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError, asyncpg.exceptions.ReadOnlySQLTransactionError,
)
CONNECT_TIMEOUT = 5.0  # seconds per connection attempt: an API call that needs one is not held longer
COMMAND_TIMEOUT = 10.0  # seconds per statement: a primary that stopped answering (packets dropped) is "not now"
SLOW_TIMEOUT = 6 * 3600.0  # seconds per statement of a schema step or `state migrate` (Connection.allow_slow)
IDLE, INTERVAL, COUNT = 10, 5, 3  # keepalive: seconds idle before the first probe, between probes, probes unanswered
NOTICED_WITHIN = IDLE + INTERVAL * COUNT  # also the most that sent data may wait unacknowledged (TCP_USER_TIMEOUT)


async def keep_alive(conn: Any) -> None:
    """Set the keepalives on an asyncpg connection's socket (those this platform has; a Unix socket has none:
    left alone)."""
    transport = getattr(conn, "_transport", None)
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    for name, value in (("SO_KEEPALIVE", 1), ("TCP_KEEPIDLE", IDLE), ("TCP_KEEPINTVL", INTERVAL),
                        ("TCP_KEEPCNT", COUNT), ("TCP_USER_TIMEOUT", NOTICED_WITHIN * 1000)):
        level = socket.SOL_SOCKET if name == "SO_KEEPALIVE" else socket.IPPROTO_TCP
        if hasattr(socket, name):
            with contextlib.suppress(OSError):  # not allowed here: the statement timeout still bounds every call
                sock.setsockopt(level, getattr(socket, name), value)


def tag_of(holder: str) -> str:
    """The ``application_name`` of a daemon's connections (at most 63 bytes: PostgreSQL's limit)."""
    return f"pb:{holder}"[:63]


def rows_changed(status: str) -> int:
    """The row count of a command tag (``UPDATE 3``, ``INSERT 0 1``); 0 for tags without one."""
    m = _COUNT.search(status)
    return int(m.group(1)) if m else 0


class PgConnection(Connection):
    """An asyncpg connection speaking shared SQL."""

    dialect = POSTGRES

    def __init__(self, conn: Any) -> None:
        self.raw = conn  # asyncpg.Connection (asyncpg ships no types)
        self.timeout: float | None = None  # None: the pool's COMMAND_TIMEOUT

    def allow_slow(self) -> None:
        self.timeout = SLOW_TIMEOUT

    async def execute(self, sql: str, *args: Any) -> int:
        return rows_changed(await self.raw.execute(POSTGRES.sql(sql), *args, timeout=self.timeout))

    async def fetch(self, sql: str, *args: Any) -> Sequence[Row]:
        rows: Sequence[Row] = await self.raw.fetch(POSTGRES.sql(sql), *args, timeout=self.timeout)
        return rows


async def _no_session_state(conn: Any) -> None:
    """The pool's reset on release: nothing to undo. asyncpg's own (``pg_advisory_unlock_all(); CLOSE ALL;
    UNLISTEN *; RESET ALL``) was one more round trip per read and per transaction; a pooled connection
    never holds a session lock, a LISTEN or a setting (leadership and LISTEN have connections of their
    own), and an open transaction is still rolled back by asyncpg before this runs."""


class PostgresDatabase(Database):
    """A PostgreSQL database (see the module docstring)."""

    dialect = POSTGRES

    def __init__(self, target: Target, holder: str = "") -> None:
        super().__init__(target)
        assert target.dsn is not None
        self.dsn = target.dsn
        self.holder = holder
        self._pool: Any = None

    @property
    def tag(self) -> str:
        """The ``application_name`` of this daemon's connections."""
        return tag_of(self.holder)

    def _connect_options(self) -> dict[str, Any]:
        """asyncpg's options for every connection: this daemon's settings, a bounded connect, and with
        several hosts the writable primary (``target_session_attrs``: libpq's default for the form)."""
        attrs = session_attrs(self.target)
        settings = {"application_name": self.tag, "idle_in_transaction_session_timeout": str(IDLE_IN_TRANSACTION_MS)}
        return {"server_settings": settings, "timeout": CONNECT_TIMEOUT, "command_timeout": COMMAND_TIMEOUT,
                **({"target_session_attrs": attrs} if attrs else {})}

    def error(self, doing: str, e: BaseException) -> DatabaseError:
        """One line naming ``state.database``, the masked URL and the cause (its password cut out)."""
        cause = scrub(f"{type(e).__name__}: {e}", self.target)
        return DatabaseError(f"{self.target.key}: {doing} {self.target.shown}: {cause}")

    async def start(self) -> None:
        try:
            self._pool = await asyncpg.create_pool(
                self.dsn, min_size=0, max_size=10, reset=_no_session_state,
                init=keep_alive, **self._connect_options(),
            )  # no floor by default (min_size 0): asyncpg's task that keeps one logs a traceback per failed try
            async with self._pool.acquire(timeout=CONNECT_TIMEOUT) as raw:  # reachable now (else exit 2); kept
                await raw.fetchval("SELECT 1")
        except CONNECT_ERRORS as e:
            raise self.error("cannot connect to", e) from None

    async def connect_one(self) -> Any:
        """A connection of its own (not from the pool), with this daemon's settings: the caller closes it."""
        try:
            conn = await asyncpg.connect(self.dsn, **self._connect_options())
        except CONNECT_ERRORS as e:
            raise self.error("cannot connect to", e) from None
        await keep_alive(conn)
        return conn

    async def stop(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()

    @property
    def pool(self) -> Any:
        if self._pool is None:
            raise DatabaseError(f"{self.target.key}: {self.target.shown} is not open")
        return self._pool

    @asynccontextmanager
    async def _acquire(self) -> AsyncIterator[Any]:
        """A pooled connection; a lost or refused one is noted for ``/healthz`` (and raised: the API's 503).
        Neither the wait for one nor a statement on it is held forever (a primary that stopped answering):
        a connection whose statement timed out is dropped, not handed out again."""
        raw: Any = None
        try:
            async with self.pool.acquire(timeout=CONNECT_TIMEOUT) as raw:
                try:
                    yield raw
                except TimeoutError:
                    raw.terminate()
                    raise
        except UNREACHABLE as e:
            self.note_unreachable(e)
            if isinstance(e, OSError | TimeoutError):  # the socket's own word: one every caller knows
                raise self.error("lost the connection to", e) from None
            raise
        self.unreachable = None

    @asynccontextmanager
    async def _begin(self) -> AsyncIterator[Connection]:
        async with self._acquire() as raw:
            tx = raw.transaction()
            await tx.start()
            try:
                yield PgConnection(raw)
            except TimeoutError:  # no ROLLBACK sent to a server that does not answer: the connection is dropped
                raise
            except BaseException:
                with contextlib.suppress(*UNREACHABLE, asyncpg.PostgresError):  # lost: the server rolls back
                    await tx.rollback()
                raise
            await tx.commit()

    @asynccontextmanager
    async def _begin_fenced(self, term: Fence) -> AsyncIterator[Connection]:
        """``BEGIN`` and the term's check in one round trip (a division by zero when the term is over)."""
        if term.lost.is_set():
            raise Deposed(f"term {term.term} is over")
        async with self._acquire() as raw:
            try:
                await raw.execute(_FENCED_BEGIN.format(term=int(term.term)))
            except asyncpg.DivisionByZeroError:
                await raw.execute("ROLLBACK")
                raise term.depose(f"term {term.term} is over") from None
            try:
                yield PgConnection(raw)
            except TimeoutError:  # no ROLLBACK sent to a server that does not answer: the connection is dropped
                raise
            except BaseException:
                with contextlib.suppress(Exception):  # a broken connection: the pool's release rolls back
                    await raw.execute("ROLLBACK")
                raise
            await raw.execute("COMMIT")

    @asynccontextmanager
    async def _reader(self) -> AsyncIterator[Connection]:
        async with self._acquire() as raw:
            yield PgConnection(raw)
