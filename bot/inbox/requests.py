"""The inbox part for records: store a request, read one, settle it once, wait for it, its clock.

A request leaves ``pending`` at most once: settling is a conditional UPDATE checked by rowcount.
"""

from __future__ import annotations

import asyncio
import contextlib

from bot.inbox import ledger
from bot.inbox.approvals import Approvals
from bot.inbox.base import RELEASED, Settled, read, row_to_record, stored, written
from bot.inbox.db import Connection, placeholders
from bot.inbox.marks import mark_settled_at
from bot.inbox.record import PENDING, Record, Settlement, dumps
from bot.inbox.sessions import PendingCaps, check_caps, check_room, next_seq
from bot.inbox.submission import KeyConflict, Submission, conflict

PENDING_LIVE = "state='pending'"
"""The WHERE of the requests_expiry index (expires_at of pending requests): the timer's next expiry and the
requests due, read without walking every pending request (it is woken by every submission)."""


class Requests(Approvals):
    """Submit, get, settle (a quorum request's approvals tallied first: ``Approvals``), wait, due."""

    async def submit(
        self, sub: Submission, now: float, timeout: float, submitted_by: str | None = None, *, hold_post: bool = False,
        room: str = "default", caps: PendingCaps | None = None, held_by: str | None = None,
    ) -> tuple[Record, bool]:
        """Store a new request with the next seq of its session; idempotent on (session, key): the same
        body again gives the stored record, another body :class:`KeyConflict`.

        ``submitted_by`` names the API token that submitted it. ``hold_post``: a new request is not posted
        until ``release_post`` (its rules are applied first, so a rule-settled one is never posted early).
        ``room``: the station room it goes to (chosen by the caller from the submitting credential); a
        session of another room raises :class:`bot.inbox.sessions.SessionInOtherRoom`. ``caps``: a new
        request over them raises :class:`bot.inbox.sessions.TooManyPending`.
        ``held_by``: the holder id of the daemon a hook waits on for it (bot.inbox.holds)."""
        async with self.database.transaction() as db:
            rec, created = await self.insert(
                db, sub, now, timeout, submitted_by, room=room, caps=caps, held=held_by is not None)
            if created:
                if hold_post:
                    await self.hold_post(db, rec.id)
                if held_by is not None:
                    await db.execute("UPDATE requests SET held_by=$1 WHERE id=$2", held_by, rec.id)
                await self.notify_change(db, "request", rec.id)
        if created:
            self.emit("request", rec)
        return rec, created

    async def insert(
        self, db: Connection, sub: Submission, now: float, timeout: float, submitted_by: str | None = None,
        *, room: str = "default", caps: PendingCaps | None = None, held: bool = False,
    ) -> tuple[Record, bool]:
        """``submit``'s work inside an open transaction: (record, created); nothing emitted.

        The one place a key is bound to its body: a used key with another body raises
        :class:`KeyConflict` (never the stored record, which belongs to whoever used the key first)."""
        if db.dialect.is_postgres:  # daemons submit at once: one session's submissions take turns
            await db.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", sub.session_id)
        await check_room(db, sub.session_id, room)  # a session is one room's: never joined from another
        if sub.key is not None:
            row = await db.fetchrow("SELECT * FROM requests WHERE session_id=$1 AND key=$2", sub.session_id, sub.key)
            if row is not None:
                rec = row_to_record(row)
                if (why := conflict(sub, rec)) is not None:
                    raise KeyConflict(why)
                return rec, False
        if caps is not None:
            await check_caps(db, caps, sub.session_id, submitted_by, key=sub.key, held=held)
        seq = await next_seq(db, sub.session_id, room)
        revision = 1 + int(await db.fetchval(
            "SELECT COUNT(*) FROM requests WHERE session_id=$1 AND tool_call_id=$2", sub.session_id, sub.tool_call_id
        ) or 0)
        rid = f"{sub.session_id}:{seq}"
        values = sub.as_fields() | {  # the submission's fields, and the rest the record starts with
            "id": rid, "request_seq": seq, "revision": revision, "state": PENDING, "requested_at": float(now),
            "expires_at": float(now + timeout), "submitted_by": submitted_by, "room": room, "kind": str(sub.kind)}
        await db.execute(f"INSERT INTO requests ({', '.join(values)}) VALUES ({placeholders(1, len(values))})",
                         *map(stored, values, values.values()))
        return await written(db, rid), True

    async def hold_post(self, db: Connection, request_id: str) -> None:
        """Keep a new request out of ``needing_post`` until ``release_post``, in its submit transaction
        (durable: the leader may be another daemon; a hold its daemon never released lapses, see
        ``needing_post``)."""
        await db.execute("UPDATE requests SET post_held=1 WHERE id=$1", request_id)

    async def release_post(self, request_id: str) -> None:
        """The request may be posted now (wake the poster after this)."""
        async with self.database.transaction() as db:
            if await db.execute("UPDATE requests SET post_held=0 WHERE id=$1 AND post_held=1", request_id):
                await self.notify_change(db, RELEASED, request_id)  # the leader may be another daemon: wake its poster

    async def get(self, request_id: str) -> Record | None:
        return await read(self.database, request_id)

    async def by_prompt_event(self, event_id: str) -> Record | None:
        found = await self._records("SELECT * FROM requests WHERE prompt_event_id=$1", event_id)
        return found[0] if found else None

    async def settle(self, request_id: str, how: Settlement) -> Record | None:
        """Leave ``pending`` once, as ``how`` says. Returns the settled record, None when it was not pending, or
        a quorum request still pending when this approval was counted (:class:`bot.inbox.quorum.NotCounted`
        through the API when it may not count). The settlement is appended to the ledger in the same
        transaction."""
        async with self.database.transaction() as db:
            if how.event_id is not None:
                await db.execute("INSERT OR IGNORE INTO handled (event_id, at) VALUES ($1, $2)", how.event_id,
                                 float(how.now))
            counted, how = await self._count(db, request_id, how)
            rec = None if counted is not None else await self._close(db, request_id, how)
        if counted is not None:
            self._wake_approved()
            return counted
        if rec is not None:
            self.emit("resolved", rec)
        return rec

    async def _close(self, db: Connection, request_id: str, how: Settlement) -> Record | None:
        """The conditional UPDATE out of ``pending``, then its timeline mark, notification and ledger entry."""
        changed = await db.execute(
            "UPDATE requests SET state=$1, outcome_option_id=$2, outcome_by=$3, outcome_via=$4,"
            " outcome_feedback=$5, decided_at=$6, outcome_answers=$9 WHERE id=$7 AND state=$8",
            how.state, how.option_id, how.by, how.via, how.feedback, float(how.now), request_id, PENDING,
            None if how.answers is None else dumps({"answers": how.answers, "chosen": how.chosen or []}),
        )
        if changed != 1:
            return None
        if how.event_id is not None and how.in_view:
            await mark_settled_at(db, how.event_id, request_id)
        await self.notify_change(db, "resolved", request_id)
        rec = await written(db, request_id)
        await ledger.append(db, rec, how.ledger_by)
        return rec

    async def wait_settled(self, request_id: str, timeout: float) -> Record | None:
        """The record once it is no longer pending, or as it is when ``timeout`` runs out."""
        ev = self._changed.setdefault(request_id, Settled())
        rec = await self.get(request_id)
        if rec is None or not rec.pending or timeout <= 0:
            if not ev.is_set() and self._changed.get(request_id) is ev and (rec is None or not rec.pending):
                del self._changed[request_id]
            return rec
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):  # not wait_for: its extra task costs the answer two loop turns
                await ev.wait()
        return ev.record or await self.get(request_id)

    async def due(self, now: float) -> list[Record]:
        """Pending records whose time is up."""
        return await self._records(
            f"SELECT * FROM requests{self._indexed_by('requests_expiry')} WHERE {PENDING_LIVE} AND expires_at<=$1"
            " ORDER BY expires_at", float(now)
        )

    async def next_expiry(self) -> float | None:
        v = await self.database.fetchval(
            f"SELECT MIN(expires_at) FROM requests{self._indexed_by('requests_expiry')} WHERE {PENDING_LIVE}"
        )
        return float(v) if v is not None else None

    async def count_pending(self) -> int:
        return int(await self.database.fetchval("SELECT COUNT(*) FROM requests WHERE state=$1", PENDING) or 0)

