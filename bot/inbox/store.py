"""The durable inbox: SQLite (WAL) through aiosqlite's API (run inline: bot/inbox/connection.py), one
transaction per state change.

It is the only place that decides a request's state. A request leaves
``pending`` at most once: settling is a conditional UPDATE checked by rowcount
(``bot/inbox/requests.py``). ``Inbox`` owns the state (the connections, the write
lock, the listeners); its parts, one job each, share it as mixins:
``requests`` (records, settle), ``listing`` (pending, pages), ``posting``
(prompt events, edits, seeded reactions), ``marks`` (the room timeline),
``handled`` (handled and parked events, key/value).
"""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import aiosqlite

from bot.inbox.base import Listener
from bot.inbox.connection import connect
from bot.inbox.handled import Handled
from bot.inbox.listing import Listing
from bot.inbox.marks import Marks
from bot.inbox.pages import JsonKept
from bot.inbox.posting import Posting
from bot.inbox.record import CANCELLED, EXPIRED, PENDING, RESOLVED, Record
from bot.inbox.requests import Requests
from bot.inbox.schema import upgrade


class Inbox(Requests, Listing, Posting, Marks, Handled):
    """Requests, their states and outcomes, seq counters, handled events, sync token."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = None
        self._read = None
        self._lock = asyncio.Lock()
        self._listeners = []
        self._changed = {}
        self._json = JsonKept()
        self._post_held = set()
        self.install_id = ""  # set by open: part of every txn id, so a wiped state never reuses an old one

    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = await connect(self.path, isolation_level=None)
        self._db.row_factory = aiosqlite.Row
        await self._db.execute("PRAGMA journal_mode=WAL")
        await self._db.execute("PRAGMA synchronous=NORMAL")
        await self._db.execute("PRAGMA busy_timeout=5000")
        await upgrade(self._db, str(self.path))
        await self.open_read_only()
        self.install_id = await self.made_once("install_id")

    async def open_read_only(self) -> None:
        """Open an existing inbox to read only (doctor): no folder made, no upgrade; writes fail (no writer)."""
        self._read = await connect(self.path.resolve().as_uri() + "?mode=ro", uri=True,
                                             isolation_level=None)
        self._read.row_factory = aiosqlite.Row
        await self._read.execute("PRAGMA busy_timeout=5000")

    async def close(self) -> None:
        if self._read is not None:
            await self._read.close()
            self._read = None
        if self._db is not None:
            await self._db.close()
            self._db = None

    def listen(self, fn: Listener) -> None:
        """Call ``fn(kind, record)`` after each committed change (kind: request/resolved)."""
        self._listeners.append(fn)

    def transaction(self) -> AbstractAsyncContextManager[aiosqlite.Connection]:
        """One write transaction (for inbox parts such as ``bot.inbox.links``); call ``emit`` after it."""
        return self._tx()

    def emit(self, kind: str, rec: Record) -> None:
        """Tell the listeners about a change committed through ``transaction``."""
        self._emit(kind, rec)


__all__ = ["CANCELLED", "EXPIRED", "PENDING", "RESOLVED", "Inbox"]
