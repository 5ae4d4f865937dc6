"""What every inbox part shares: the database (:mod:`bot.inbox.db`), one write transaction at a time,
committed reads, change notification, and a row made a ``Record``.

The state lives in :class:`bot.inbox.store.Inbox`; the parts (``requests``, ``listing``, ``posting``,
``marks``, ``handled``) are its mixins over these helpers.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import fields
from typing import Any

from bot.events.states import State, Via
from bot.inbox.db import Connection, Database, Row
from bot.inbox.db.notify import notify
from bot.inbox.pages import JsonKept
from bot.inbox.quorum import APPROVED  # a quorum request's approvals changed
from bot.inbox.record import Outcome, Record, dumps

Listener = Callable[[str, Record], None]
CHANGED = "pb_changed"
"""The NOTIFY channel of committed changes on PostgreSQL: ``kind<TAB>holder<TAB>request id``
(bot.inbox.other_daemons)."""
RELEASED = "released"
"""The kind of a NOTIFY that a held request may be posted now: only ``on_release`` callbacks hear it."""


class Settled(asyncio.Event):
    """Set when a request leaves ``pending``; carries the settled record, so a long-poll answers without
    reading it again (the settle is committed before it is set)."""

    record: Record | None = None


JSON_COLUMNS = ("options", "raw_input", "locations", "content", "params", "approvers", "approvals", "escalated_to")
"""The record's fields stored as JSON text (NULL: None)."""
COLUMNS = tuple(f.name for f in fields(Record) if f.name != "outcome")
"""The record's fields that are ``requests`` columns of the same name (its outcome is the ``outcome_*`` ones)."""


def stored(column: str, value: Any) -> Any:
    """``value`` as the ``requests`` column of its field's name stores it."""
    return dumps(value) if column in JSON_COLUMNS and value is not None else value


def row_to_record(r: Row) -> Record:
    """A ``requests`` row as a ``Record``."""
    v = {c: r[c] for c in COLUMNS} | {c: json.loads(r[c]) for c in JSON_COLUMNS if r[c] is not None}
    outcome = None
    if r["outcome_via"] is not None:
        outcome = Outcome(
            option_id=r["outcome_option_id"],
            answered_by=r["outcome_by"],
            via=Via(r["outcome_via"]),
            feedback=r["outcome_feedback"],
            decided_at=r["decided_at"],
            **answers_of(r["outcome_answers"]),
        )
    return Record(**v | {"state": State(r["state"]), "prompt_edited": bool(r["prompt_edited"]), "outcome": outcome,
                         "approvals": v["approvals"] if r["approvals"] is not None else []})


def answers_of(stored: str | None) -> dict[str, Any]:
    """``answers`` and ``chosen`` of an ``Outcome`` from the stored ``outcome_answers`` JSON."""
    if stored is None:
        return {}
    data = json.loads(stored)
    return {"answers": data.get("answers"), "chosen": data.get("chosen")}


class InboxBase:
    """The helpers the inbox parts use; the attributes are set by ``Inbox.__init__``."""

    database: Database  # SQLite or PostgreSQL (bot.inbox.db): reads outside a transaction see only commits
    _listeners: list[Listener]
    _remote: list[Listener]  # also told of changes committed by another daemon on the same database
    _changed: dict[str, Settled]
    _released: list[Callable[[], None]]  # told when another daemon released a held request (wake the poster)
    _approved: list[Callable[[], None]]  # told when a quorum request's approvals changed (edit its prompt)
    _json: JsonKept  # pending records' API JSON, for GET /permissions

    @property
    def db(self) -> Database:
        return self.database

    def _indexed_by(self, index: str) -> str:
        """`` INDEXED BY index`` on SQLite (which keeps no planner statistics and may take a worse index for a
        partial one's query), nothing on PostgreSQL (whose statistics choose)."""
        return "" if self.database.dialect.is_postgres else f" INDEXED BY {index}"

    async def _records(self, sql: str, *args: Any) -> list[Record]:
        """The records a committed read of ``requests`` rows finds."""
        return [row_to_record(r) for r in await self.database.fetch(sql, *args)]

    async def _notify(self, db: Connection, kind: str, request_id: str) -> None:
        """Inside a writing transaction: the other daemons on this database hear of the change once it commits
        (PostgreSQL only; on SQLite one daemon owns the file and ``_emit`` tells everyone)."""
        if db.dialect.is_postgres:
            await notify(db, CHANGED, f"{kind}\t{getattr(self.database, 'holder', '')}\t{request_id}")

    def _tx(self) -> AbstractAsyncContextManager[Connection]:
        """One write transaction (a nested one in the same task joins it)."""
        return self.database.transaction()

    def _wake_approved(self) -> None:
        for wake in self._approved:
            wake()

    def _emit(self, kind: str, rec: Record) -> None:
        ev = self._changed.pop(rec.id, None)
        if ev is not None and kind == "resolved":
            ev.record = rec
            ev.set()
        elif ev is not None:
            self._changed[rec.id] = ev
        for fn in self._listeners:
            fn(kind, rec)

    def heard(self, kind: str, rec: Record) -> None:
        """A change another daemon committed (bot.inbox.other_daemons): wake this daemon's waiters and the listeners
        that follow every daemon's changes (not webhooks or counters: the committing daemon tells those)."""
        if kind == RELEASED:
            for wake in self._released:
                wake()
            return
        if kind == APPROVED:
            self._wake_approved()
            return
        ev = self._changed.get(rec.id)
        if ev is not None and kind == "resolved" and not rec.pending:
            del self._changed[rec.id]
            ev.record = rec
            ev.set()
        for fn in self._remote:
            fn(kind, rec)
