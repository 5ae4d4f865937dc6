"""The durable inbox: one :class:`bot.inbox.db.Database` (SQLite WAL, its calls inline on the loop's thread,
or PostgreSQL), one transaction per state change.

It is the only place that decides a request's state. A request leaves
``pending`` at most once: settling is a conditional UPDATE checked by the rows it
changed (``bot/inbox/requests.py``). ``Inbox`` owns the state (the database, the
listeners); its parts, one job each, share it as mixins:
``requests`` (records, settle; ``approvals``: quorum tallies, escalation), ``listing`` (pending, pages), ``posting``
(prompt events, edits, seeded reactions), ``marks`` (the room timeline),
``handled`` (handled and parked events, key/value), ``holds`` (which daemon holds a hook's request).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bot.inbox.base import Listener
from bot.inbox.db import Database, create, parse
from bot.inbox.db.sqlite import SqliteDatabase
from bot.inbox.handled import Handled
from bot.inbox.holds import Holds
from bot.inbox.listing import Listing
from bot.inbox.marks import Marks
from bot.inbox.pages import JsonKept
from bot.inbox.posting import Posting
from bot.inbox.requests import Requests
from bot.inbox.schema import upgrade


class Inbox(Requests, Listing, Posting, Marks, Handled, Holds):
    """Requests, their states and outcomes, seq counters, handled events, sync token."""

    def __init__(self, where: Path | Database) -> None:
        """``where``: a SQLite file, or a :class:`Database` not started yet (``bot.inbox.db.create(url)``)."""
        self.database = where if isinstance(where, Database) else create(f"sqlite:{Path(where).resolve()}")
        self._started = False
        self._listeners = []
        self._remote = []
        self._changed = {}
        self._released = []
        self._approved = []
        self._json = JsonKept()
        self.install_id = ""  # set by open: part of every txn id, so a wiped state never reuses an old one

    @property
    def where(self) -> str:
        """The database, as it may be shown (a path, or a URL with its password masked)."""
        return self.database.target.shown

    async def open(self) -> None:
        await self.database.start()
        self._started = True
        await upgrade(self.database, self.where)
        self.install_id = await self.made_once("install_id")

    async def open_read_only(self) -> None:
        """Open an existing inbox to read only (doctor): no folder made, no upgrade; writes fail (no writer)."""
        if isinstance(self.database, SqliteDatabase):
            self.database = SqliteDatabase(parse(f"sqlite:{self.database.path}"), read_only=True)
        await self.database.start()
        self._started = True

    async def close(self) -> None:
        if self._started:
            self._started = False
            await self.database.stop()

    def listen(self, fn: Listener, *, every_daemon: bool = False) -> None:
        """Call ``fn(kind, record)`` after each committed change (kind: request/resolved/amended); with
        ``every_daemon``, also after one another daemon on the same PostgreSQL database committed."""
        self._listeners.append(fn)
        if every_daemon:
            self._remote.append(fn)

    def on_release(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` when another daemon released a held request (``release_post``): it may be posted now."""
        self._released.append(fn)

    def on_approved(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` when a quorum request's approvals changed (on this daemon or another): its prompt is
        to be edited."""
        self._approved.append(fn)

    def waited(self) -> list[str]:
        """The ids long-polls of this daemon wait on."""
        return list(self._changed)
