"""The inbox part for approvals: a quorum request's approvals, tallied inside the settlement's transaction
(:meth:`bot.inbox.requests.Requests.settle` calls ``_count``; the decision is :mod:`bot.inbox.quorum`'s);
the prompts to edit as they arrive; escalation's clock (``escalated_at``, bot.service.escalation)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from bot.events.states import Via
from bot.inbox import quorum
from bot.inbox.base import InboxBase, read, row_to_record
from bot.inbox.db import Connection
from bot.inbox.record import PENDING, Record, Settlement, dumps


class Approvals(InboxBase):
    """Quorum tallies, progress edits, escalation marks."""

    async def _count(self, db: Connection, request_id: str, how: Settlement) -> tuple[Record | None, Settlement]:
        """A person's answer to a quorum request (bot.inbox.quorum), inside the settlement's transaction:
        (the record, still pending) when it did not settle it (an approval counted, the same person again,
        not one of its answerers); else (None, the settlement): as it was when it is no quorum request (or
        not pending), naming every approver (or the rejecter) when it settles now. Through the API
        (``how.person``: whom the token belongs to) a refused answer raises
        :class:`bot.inbox.quorum.NotCounted`, so the caller hears why."""
        if how.option_id is None or how.via not in quorum.PERSON_VIAS:
            return None, how
        lock = " FOR UPDATE" if db.dialect.is_postgres else ""  # approvals on two daemons take turns
        row = await db.fetchrow(f"SELECT * FROM requests WHERE id=$1 AND state=$2{lock}", request_id, PENDING)
        if row is None or int(row["approvals_needed"] or 0) <= 1:
            return None, how
        rec = row_to_record(row)
        approvers = None if rec.approvers is None else [*rec.approvers, *(rec.escalated_to or [])]
        step = quorum.tally(rec.approvals_needed, approvers, rec.approvals, rec.options, how.option_id, how.by,
                            how.via, how.now, how.person)
        if step.kind == "refused" and how.via == Via.API:
            raise quorum.NotCounted(f"request {request_id!r} {step.reason}")
        if step.kind in ("counted", "settle"):
            if len(step.given) != len(rec.approvals):  # one more approval (a reject leaves them as they are)
                await db.execute(
                    "UPDATE requests SET approvals=$1, approvals_count=$2 WHERE id=$3",
                    dumps(step.given), len(step.given), request_id,
                )
            if step.kind == "settle":  # the last approval (naming every approver), or a reject: settled now
                return None, replace(how, option_id=str(step.option_id), ledger_by=step.by)
            await self.notify_change(db, quorum.APPROVED, request_id)
            rec = replace(rec, approvals=step.given)
        return rec, how

    async def require(self, request_id: str, needed: int, approvers: Sequence[str] | None) -> Record | None:
        """Make a pending request need ``needed`` distinct approvers (an ask rule), from ``approvers``
        (None: its room's answerers); before it is posted (its prompt shows it)."""
        async with self.database.transaction() as db:
            await db.execute(
                "UPDATE requests SET approvals_needed=$1, approvers=$2 WHERE id=$3 AND state=$4",
                int(needed), None if approvers is None else dumps(list(approvers)), request_id, PENDING,
            )
            return await read(db, request_id)

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
        async with self.database.transaction() as db:
            changed = await db.execute(
                "UPDATE requests SET escalated_at=$1, escalated_to=$2, approvals_shown=-1"
                " WHERE id=$3 AND state=$4 AND escalated_at IS NULL", float(now), dumps(list(to)), request_id, PENDING,
            )
            if changed:
                await self.notify_change(db, quorum.APPROVED, request_id)
        if changed:
            self._wake_approved()
        return bool(changed)

    async def mark_progress_shown(self, request_id: str, count: int) -> None:
        await self.database.execute("UPDATE requests SET approvals_shown=$1 WHERE id=$2", int(count), request_id)

