"""The inbox part for approvals: a quorum request's approvals, tallied inside the settlement's transaction
(:meth:`bot.inbox.requests.Requests.settle` calls ``_tally``; the decision is :mod:`bot.inbox.quorum`'s);
the prompts to edit as they arrive; escalation's clock (``escalated_at``, bot.service.escalation)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from bot.events.states import Via
from bot.inbox import quorum
from bot.inbox.base import InboxBase, row_to_record
from bot.inbox.db import Connection
from bot.inbox.record import PENDING, Record, dumps


class Approvals(InboxBase):
    """Quorum tallies, progress edits, escalation marks."""

    async def _tally(
        self, db: Connection, request_id: str, option_id: str, by: str, via: Via, now: float,
        person: str | None = None,
    ) -> Record | tuple[str, list[str]] | None:
        """A person's answer to a quorum request (bot.inbox.quorum), inside the settlement's transaction:
        the record, still pending (an approval counted, the same person again, not one of its answerers);
        (option, approvers) when it settles now; None when it is no quorum request (or not pending).
        Through the API (``person``: whom the token belongs to) a refused answer raises
        :class:`bot.inbox.quorum.NotCounted`, so the caller hears why."""
        lock = " FOR UPDATE" if db.dialect.is_postgres else ""  # approvals on two daemons take turns
        row = await db.fetchrow(f"SELECT * FROM requests WHERE id=$1 AND state=$2{lock}", request_id, PENDING)
        if row is None or int(row["approvals_needed"] or 0) <= 1:
            return None
        rec = row_to_record(row)
        approvers = None if rec.approvers is None else [*rec.approvers, *(rec.escalated_to or [])]
        step = quorum.tally(
            rec.approvals_needed, approvers, rec.approvals, rec.options, option_id, by, via, now, person)
        if step.kind == "refused" and via == Via.API:
            raise quorum.NotCounted(f"request {request_id!r} {step.reason}")
        if step.kind == "settle" and len(step.given) == len(rec.approvals):  # a reject: the approvals stay
            return str(step.option_id), step.by
        if step.kind in ("counted", "settle"):
            await db.execute(
                "UPDATE requests SET approvals=$1, approvals_count=$2 WHERE id=$3",
                dumps(step.given), len(step.given), request_id,
            )
            if step.kind == "settle":  # the last approval: settled now, naming every approver
                return str(step.option_id), step.by
            await self._notify(db, quorum.APPROVED, request_id)
            rec = replace(rec, approvals=step.given)
        return rec

    async def require(self, request_id: str, needed: int, approvers: Sequence[str] | None) -> Record | None:
        """Make a pending request need ``needed`` distinct approvers (an ask rule), from ``approvers``
        (None: its room's answerers); before it is posted (its prompt shows it)."""
        async with self._tx() as db:
            await db.execute(
                "UPDATE requests SET approvals_needed=$1, approvers=$2 WHERE id=$3 AND state=$4",
                int(needed), None if approvers is None else dumps(list(approvers)), request_id, PENDING,
            )
            row = await db.fetchrow("SELECT * FROM requests WHERE id=$1", request_id)
        return row_to_record(row) if row is not None else None

    async def needing_progress(self, limit: int = 100) -> list[Record]:
        """Pending prompts to edit: a quorum's whose approvals changed, an escalated one's."""
        return await self._records(
            "SELECT * FROM requests WHERE state=$1 AND (approvals_needed>1 OR escalated_at IS NOT NULL)"
            " AND prompt_event_id IS NOT NULL AND approvals_shown<>approvals_count ORDER BY requested_at LIMIT $2",
            PENDING, limit,
        )

    async def escalation_due(self, room: str, before: float, limit: int = 100) -> list[Record]:
        """Pending prompts of ``room`` posted, never escalated, and requested before ``before``."""
        return await self._records(
            "SELECT * FROM requests WHERE state=$1 AND room=$2 AND escalated_at IS NULL AND prompt_event_id IS NOT"
            " NULL AND requested_at<=$3 ORDER BY requested_at LIMIT $4", PENDING, room, float(before), limit,
        )

    async def next_escalation(self, room: str) -> float | None:
        """When ``room``'s oldest pending prompt not escalated yet was requested."""
        v = await self.database.fetchval(
            "SELECT MIN(requested_at) FROM requests WHERE state=$1 AND room=$2 AND escalated_at IS NULL", PENDING, room
        )
        return float(v) if v is not None else None

    async def mark_escalated(self, request_id: str, to: Sequence[str], now: float) -> bool:
        """Escalated, once (False when it was already, or is no longer pending); its prompt is edited to say so."""
        async with self._tx() as db:
            changed = await db.execute(
                "UPDATE requests SET escalated_at=$1, escalated_to=$2, approvals_shown=-1"
                " WHERE id=$3 AND state=$4 AND escalated_at IS NULL", float(now), dumps(list(to)), request_id, PENDING,
            )
            if changed:
                await self._notify(db, quorum.APPROVED, request_id)
        if changed:
            self._wake_approved()
        return bool(changed)

    async def mark_progress_shown(self, request_id: str, count: int) -> None:
        async with self._tx() as db:
            await db.execute("UPDATE requests SET approvals_shown=$1 WHERE id=$2", int(count), request_id)

