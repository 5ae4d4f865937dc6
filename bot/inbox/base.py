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
from typing import Any

from bot.events.states import State, Via
from bot.inbox.db import Connection, Database, Row
from bot.inbox.db.notify import notify
from bot.inbox.pages import JsonKept
from bot.inbox.quorum import APPROVED  # a quorum request's approvals changed
from bot.inbox.record import Outcome, Record

Listener = Callable[[str, Record], None]
CHANGED = "pb_changed"
"""The NOTIFY channel of committed changes on PostgreSQL: ``kind<TAB>holder<TAB>request id`` (bot.inbox.across)."""
RELEASED = "released"
"""The kind of a NOTIFY that a held request may be posted now: only ``on_release`` callbacks hear it."""


class Settled(asyncio.Event):
    """Set when a request leaves ``pending``; carries the settled record, so a long-poll answers without
    reading it again (the settle is committed before it is set)."""

    record: Record | None = None


def row_to_record(r: Row) -> Record:
    """A ``requests`` row as a ``Record``."""
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
        approvals_needed=r["approvals_needed"],
        approvers=json.loads(r["approvers"]) if r["approvers"] is not None else None,
        approvals=json.loads(r["approvals"]) if r["approvals"] is not None else [],
        approvals_shown=r["approvals_shown"],
        escalated_at=r["escalated_at"],
        escalated_to=json.loads(r["escalated_to"]) if r["escalated_to"] is not None else None,
        kind=r["kind"],
    )


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
        """A change another daemon committed (bot.inbox.across): wake this daemon's waiters and the listeners
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
