"""What every inbox part shares: the database (:mod:`bot.inbox.db`), one write transaction at a time,
committed reads, change notification, and a row made a ``Record``.

The state lives in :class:`bot.inbox.store.Inbox`; the parts (``requests``, ``listing``, ``posting``,
``marks``, ``handled``) are its mixins over these helpers.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
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
    if r["outcome_via"] is not None:  # a question's answers: {"answers", "chosen"}
        answers = json.loads(r["outcome_answers"]) if r["outcome_answers"] is not None else {}
        outcome = Outcome(r["outcome_option_id"], r["outcome_by"], Via(r["outcome_via"]), r["outcome_feedback"],
                          r["decided_at"], answers.get("answers"), answers.get("chosen"))
    return Record(**v | {"state": State(r["state"]), "prompt_edited": bool(r["prompt_edited"]), "outcome": outcome,
                         "approvals": v["approvals"] if r["approvals"] is not None else []})


async def read(db: Connection | Database, request_id: str) -> Record | None:
    """The record ``request_id`` (as ``db`` sees it: inside its transaction, or committed)."""
    row = await db.fetchrow("SELECT * FROM requests WHERE id=$1", request_id)
    return row_to_record(row) if row is not None else None


async def written(db: Connection, request_id: str) -> Record:
    """The record of a row this transaction wrote."""
    rec = await read(db, request_id)
    assert rec is not None
    return rec


class InboxBase:
    """The helpers the inbox parts use; the attributes are set by ``Inbox.__init__``."""

    database: Database  # SQLite or PostgreSQL (bot.inbox.db): reads outside a transaction see only commits
    _listeners: list[Listener]
    _remote: list[Listener]  # also told of changes committed by another daemon on the same database
    _changed: dict[str, Settled]
    _released: list[Callable[[], None]]  # told when another daemon released a held request (wake the poster)
    _approved: list[Callable[[], None]]  # told when a quorum request's approvals changed (edit its prompt)
    _json: JsonKept  # pending records' API JSON, for GET /permissions

    def _indexed_by(self, index: str) -> str:
        """`` INDEXED BY index`` on SQLite (which keeps no planner statistics and may take a worse index for a
        partial one's query), nothing on PostgreSQL (whose statistics choose)."""
        return "" if self.database.dialect.is_postgres else f" INDEXED BY {index}"

    async def _records(self, sql: str, *args: Any) -> list[Record]:
        """The records a committed read of ``requests`` rows finds."""
        return [row_to_record(r) for r in await self.database.fetch(sql, *args)]

    async def notify_change(self, db: Connection, kind: str, request_id: str) -> None:
        """Inside a writing transaction: the other daemons on this database hear of the change once it commits
        (PostgreSQL only; on SQLite one daemon owns the file and ``emit`` tells everyone)."""
        if db.dialect.is_postgres:
            await notify(db, CHANGED, f"{kind}\t{getattr(self.database, 'holder', '')}\t{request_id}")

    def _wake_approved(self) -> None:
        for wake in self._approved:
            wake()

    def _wake(self, rec: Record) -> None:
        """Answer the long-polls waiting on ``rec``, settled."""
        ev = self._changed.pop(rec.id, None)
        if ev is not None:
            ev.record = rec
            ev.set()

    def emit(self, kind: str, rec: Record) -> None:
        """Tell the listeners about a committed change."""
        if kind == "resolved":
            self._wake(rec)
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
        if kind == "resolved" and not rec.pending:
            self._wake(rec)
        for fn in self._remote:
            fn(kind, rec)
