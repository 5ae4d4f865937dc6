"""What every inbox part shares: the two connections, one write transaction at a time, committed reads,
change notification, and a row made a ``Record``.

The state lives in :class:`bot.inbox.store.Inbox`; the parts (``requests``, ``listing``, ``posting``,
``marks``, ``handled``) are its mixins over these helpers.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiosqlite

from bot.events.states import State, Via
from bot.inbox.pages import JsonKept
from bot.inbox.record import Outcome, Record

Listener = Callable[[str, Record], None]


class Settled(asyncio.Event):
    """Set when a request leaves ``pending``; carries the settled record, so a long-poll answers without
    reading it again (the settle is committed before it is set)."""

    record: Record | None = None


def row_to_record(r: aiosqlite.Row) -> Record:
    """A ``requests`` row as a ``Record``."""
    outcome = None
    if r["outcome_via"] is not None:
        outcome = Outcome(
            option_id=r["outcome_option_id"],
            answered_by=r["outcome_by"],
            via=Via(r["outcome_via"]),
            feedback=r["outcome_feedback"],
            decided_at=r["decided_at"],
        )
    return Record(
        id=r["id"],
        session_id=r["session_id"],
        request_seq=r["request_seq"],
        key=r["key"],
        label=r["label"],
        tool_call_id=r["tool_call_id"],
        title=r["title"],
        tool_kind=r["tool_kind"],
        tool_name=r["tool_name"],
        options=json.loads(r["options"]),
        raw_input=json.loads(r["raw_input"]) if r["raw_input"] is not None else None,
        locations=json.loads(r["locations"]),
        content=json.loads(r["content"]),
        params=json.loads(r["params"]),
        digest=r["digest"],
        revision=r["revision"],
        state=State(r["state"]),
        requested_at=r["requested_at"],
        expires_at=r["expires_at"],
        prompt_event_id=r["prompt_event_id"],
        prompt_edited=bool(r["prompt_edited"]),
        outcome=outcome,
        cwd=r["cwd"],
        submitted_by=r["submitted_by"],
        room=r["room"],
    )


class Rows:
    """A read's rows, fetched: the cursor-like answer of ``InboxBase._read_rows``."""

    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    async def fetchone(self) -> Any:
        return self.rows[0] if self.rows else None

    async def fetchall(self) -> list[Any]:
        return self.rows


class InboxBase:
    """The helpers the inbox parts use; the attributes are set by ``Inbox.__init__``."""

    _db: aiosqlite.Connection | None
    _read: aiosqlite.Connection | None  # reads: only what is committed (WAL snapshots)
    _lock: asyncio.Lock
    _listeners: list[Listener]
    _changed: dict[str, Settled]
    _json: JsonKept  # pending records' API JSON, for GET /permissions
    _post_held: set[str]  # new requests whose rules are being applied: not to be posted yet

    @property
    def reader(self) -> aiosqlite.Connection:
        """The connection reads outside a transaction use: it never sees a write not yet committed."""
        assert self._read is not None, "inbox not open"
        return self._read

    @property
    def db(self) -> aiosqlite.Connection:
        assert self._db is not None, "inbox not open"
        return self._db

    async def _read_rows(self, sql: str, args: tuple[Any, ...] = ()) -> Rows:
        """Run a read on ``reader``, its cursor closed at once (an open one would pin an old snapshot)."""
        async with self.reader.execute(sql, args) as cur:
            return Rows(list(await cur.fetchall()))

    async def _records(self, sql: str, args: tuple[Any, ...] = ()) -> list[Record]:
        """The records a committed read of ``requests`` rows finds."""
        return [row_to_record(r) for r in await (await self._read_rows(sql, args)).fetchall()]

    @asynccontextmanager
    async def _tx(self) -> AsyncIterator[aiosqlite.Connection]:
        async with self._lock:
            await self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
                await self.db.execute("COMMIT")
            except BaseException:
                if self.db.in_transaction:  # also when COMMIT itself failed (a full or read-only disk)
                    await self.db.execute("ROLLBACK")
                raise

    def _emit(self, kind: str, rec: Record) -> None:
        ev = self._changed.pop(rec.id, None)
        if ev is not None and kind == "resolved":
            ev.record = rec
            ev.set()
        elif ev is not None:
            self._changed[rec.id] = ev
        for fn in self._listeners:
            fn(kind, rec)
