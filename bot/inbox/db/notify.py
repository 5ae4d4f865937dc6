"""Wake-ups across daemons: a settlement on one daemon wakes the long-polls and streams of all of them.

PostgreSQL's LISTEN/NOTIFY carries ids only (a payload must stay under 8000 bytes; the record is read
from the database). :func:`notify` runs inside the writing transaction, so the others hear it only once
it is committed. :class:`Listener` holds one connection of its own; when that connection is lost it
connects again and calls ``on_gap`` (ids may have been missed meanwhile: re-read what is waited on).
On SQLite (one daemon per file) :func:`notify` does nothing: the inbox's in-process wake-up is enough.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog

from bot.inbox.db.base import Connection, DatabaseError
from bot.inbox.db.postgres import UNREACHABLE, PostgresDatabase
from bot.util.backoff import Backoff

log = structlog.get_logger("notify")

MAX_PAYLOAD = 7999  # bytes: PostgreSQL refuses a payload of 8000 or more
SETTLED = "pb_settled"


def check_payload(ident: str) -> str:
    """``ident`` if it fits a NOTIFY payload, else ValueError."""
    if len(ident.encode()) > MAX_PAYLOAD:
        raise ValueError(f"a NOTIFY payload is at most {MAX_PAYLOAD} bytes; send an id, not a record")
    return ident


async def notify(conn: Connection, channel: str, ident: str) -> None:
    """Tell every listening daemon ``ident`` on ``channel`` when this transaction commits."""
    check_payload(ident)
    if conn.dialect.is_postgres:
        await conn.execute("SELECT pg_notify($1, $2)", channel, ident)


class Listener:
    """LISTEN on ``channel``: ``on_id(ident)`` for each notification, ``on_gap()`` after a reconnect."""

    def __init__(
        self, db: PostgresDatabase, channel: str, on_id: Callable[[str], None], on_gap: Callable[[], None] | None = None
    ) -> None:
        self.db = db
        self.channel = channel
        self.on_id = on_id
        self.on_gap = on_gap
        self.backoff = Backoff(0.2, 5.0)
        self._conn: Any = None
        self._stopping = False
        self._reconnecting: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Connect and LISTEN (raises DatabaseError when the database cannot be reached)."""
        self._stopping = False
        conn = await self.db.connect_one()
        try:
            await conn.add_listener(self.channel, self._heard)
        except BaseException:
            conn.terminate()  # lost again at once: the caller retries
            raise
        conn.add_termination_listener(self._terminated)
        self._conn = conn

    def _heard(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self.on_id(payload)

    def _terminated(self, _conn: Any) -> None:
        if self._stopping or self._reconnecting is not None:
            return
        log.warning("notify_listener_lost", channel=self.channel)
        self._reconnecting = asyncio.get_running_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        try:
            while not self._stopping:
                try:
                    await self.start()
                except (DatabaseError, *UNREACHABLE) as e:  # the database is away (a restart, a fail-over)
                    self.db.note_unreachable(e)
                    delay = self.backoff.delay()
                    log.debug("notify_listener_retry", error=str(e)[:300], retry_in=round(delay, 2))  # lost: said
                    await asyncio.sleep(delay)
                    continue
                self.backoff.reset()
                log.info("notify_listener_back", channel=self.channel)
                if self.on_gap is not None:
                    self.on_gap()
                return
        finally:
            self._reconnecting = None

    async def stop(self) -> None:
        self._stopping = True
        if self._reconnecting is not None:
            self._reconnecting.cancel()
        if self._conn is not None:
            conn, self._conn = self._conn, None
            if not conn.is_closed():
                await conn.close()
