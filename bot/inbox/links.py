"""The inbox's part for watched harnesses: which harness request became which inbox request, and
whether its answer reached the harness.

Kept in the inbox (table ``harness_links``), so a restart of the bot or of the harness loses nothing
and doubles nothing: a held request is linked in the same transaction that stores it, and the
delivery state moves ``NULL -> sending -> delivered | elsewhere | refused`` (or ``withdrawn`` when
the harness let it go first). A held request that changed after it was shown is asked again
(``revise``): its link moves to a new request, a new revision of the same tool call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bot.inbox import ledger
from bot.inbox.base import row_to_record, written
from bot.inbox.db import Connection, Row, placeholders
from bot.inbox.record import CANCELLED, PENDING, Record
from bot.inbox.store import Inbox
from bot.inbox.submission import KeyConflict, Submission

SENDING, DELIVERED, ELSEWHERE, REFUSED, WITHDRAWN = "sending", "delivered", "elsewhere", "refused", "withdrawn"


class Squatted(Exception):
    """A harness request's inbox key is already taken by a request that did not come from it."""


@dataclass(frozen=True)
class Link:
    """One harness request and the inbox request it became."""

    harness: str
    harness_id: str
    fingerprint: str
    request_id: str
    delivery: str | None
    attempts: int


def _link(r: Row) -> Link:
    return Link(r["harness"], r["harness_id"], r["fingerprint"], r["request_id"], r["delivery"], int(r["attempts"]))


OPEN = "(l.delivery IS NULL OR l.delivery=$2)"
"""A link whose delivery is still open ($2: ``SENDING``)."""
CANCEL = (
    "UPDATE requests SET state=$1, outcome_option_id=NULL, outcome_by=$2, outcome_via='cancel', outcome_feedback=$3"
)
"""A request shown cancelled ($1: ``CANCELLED``) by $2 with the note $3 (which names its answer, if any)."""


class Links:
    """Harness links over one open ``Inbox``."""

    def __init__(self, inbox: Inbox) -> None:
        self.inbox = inbox

    async def _insert(
        self, db: Connection, sub: Submission, now: float, timeout: float, room: str
    ) -> tuple[Record, bool]:
        try:
            return await self.inbox.insert(db, sub, now, timeout, room=room)
        except KeyConflict as e:
            raise Squatted(f"{sub.key}: {e}") from None

    async def submit(
        self, harness: str, harness_id: str, fingerprint: str, sub: Submission, now: float, timeout: float,
        *, hold_post: bool = False, room: str = "default",
    ) -> tuple[Record, bool]:
        """Store a held request and its link in one transaction; idempotent (the submission's ``key``).
        ``hold_post`` and ``room`` as for ``Inbox.submit``."""
        async with self.inbox.database.transaction() as db:
            rec, created = await self._insert(db, sub, now, timeout, room)
            if created:
                if hold_post:
                    await self.inbox.hold_post(db, rec.id)
                await self.inbox.notify_change(db, "request", rec.id)
            elif await db.fetchrow(
                "SELECT 1 FROM harness_links WHERE request_id=$1 AND harness=$2 AND harness_id=$3"
                " AND fingerprint=$4",
                rec.id, harness, harness_id, fingerprint,
            ) is None:
                raise Squatted(f"{rec.id}: the inbox holds this key from another source")
            await db.execute(
                "INSERT OR IGNORE INTO harness_links (harness, harness_id, fingerprint, request_id, at)"
                " VALUES ($1, $2, $3, $4, $5)",
                harness, harness_id, fingerprint, rec.id, float(now),
            )
        if created:
            self.inbox.emit("request", rec)
        return rec, created

    async def known(self, harness: str, harness_ids: list[str]) -> set[tuple[str, str]]:
        """(harness_id, fingerprint) of the requests of ``harness`` with these ids the inbox holds."""
        out: set[tuple[str, str]] = set()
        for i in range(0, len(harness_ids), 500):
            chunk = harness_ids[i : i + 500]
            rows = await self.inbox.database.fetch(
                "SELECT harness_id, fingerprint FROM harness_links WHERE harness=$1 AND harness_id IN"
                f" ({placeholders(2, len(chunk))})",
                harness, *chunk,
            )
            out |= {(str(r[0]), str(r[1])) for r in rows}
        return out

    async def pending(self, harness: str) -> list[Link]:
        """Links of ``harness`` whose inbox request is still pending (their delivery is still open)."""
        rows = await self.inbox.database.fetch(
            "SELECT l.* FROM harness_links l JOIN requests q ON q.id = l.request_id"
            f" WHERE l.harness=$1 AND {OPEN} AND q.state=$3",
            harness, SENDING, PENDING,
        )
        return [_link(r) for r in rows]

    async def undelivered(self, harness: str) -> list[tuple[Link, Record]]:
        """Settled requests of ``harness`` whose answer has not reached it yet, oldest decision first."""
        return await self._with_requests(harness, " AND q.state!=$3 ORDER BY q.decided_at", PENDING)

    async def open(self, harness: str) -> list[tuple[Link, Record]]:
        """Links of ``harness`` whose delivery is still open (pending, or settled and not yet sent), with
        their requests."""
        return await self._with_requests(harness, " ORDER BY q.requested_at")

    async def _with_requests(self, harness: str, then: str, *args: object) -> list[tuple[Link, Record]]:
        rows = await self.inbox.database.fetch(
            "SELECT l.harness, l.harness_id, l.fingerprint, l.request_id, l.delivery, l.attempts, q.*"
            f" FROM harness_links l JOIN requests q ON q.id = l.request_id WHERE l.harness=$1 AND {OPEN}{then}",
            harness, SENDING, *args,
        )
        return [(_link(r), row_to_record(r)) for r in rows]

    async def revise(
        self, link: Link, sub: Submission, now: float, timeout: float, *, by: str,
        note: Callable[[Record, Record], str], hold_post: bool = False,
    ) -> tuple[Record, Record] | None:
        """The harness changed ``link``'s request after it was shown: in one transaction its request is
        closed (cancelled; a pending one as settled, a settled one amended, its answer never sent) with
        ``note(old, new)``, ``sub`` is stored as the new request (the next revision of the same tool
        call) and the link moves to it. (old, new), or None when the link moved on meanwhile."""
        async with self.inbox.database.transaction() as db:
            row = await db.fetchrow(
                "SELECT q.* FROM harness_links l JOIN requests q ON q.id = l.request_id WHERE l.request_id=$1"
                f" AND l.harness=$3 AND l.harness_id=$4 AND l.fingerprint=$5 AND {OPEN}",
                link.request_id, SENDING, link.harness, link.harness_id, link.fingerprint,
            )
            if row is None:
                return None
            old = row_to_record(row)
            new, created = await self._insert(db, sub, now, timeout, old.room)
            if not created:
                raise Squatted(f"{new.id}: the inbox holds this key already")
            if hold_post:
                await self.inbox.hold_post(db, new.id)
            why = note(old, new)
            if old.pending:  # settled now
                await db.execute(f"{CANCEL}, decided_at=$5 WHERE id=$4", CANCELLED, by, why, old.id, float(now))
            else:  # amended: its prompt is edited again
                await db.execute(f"{CANCEL}, prompt_edited=0 WHERE id=$4", CANCELLED, by, why, old.id)
            await db.execute(
                "UPDATE harness_links SET request_id=$1, delivery=NULL, attempts=0, at=$2 WHERE request_id=$3",
                new.id, float(now), old.id,
            )
            await self.inbox.notify_change(db, "resolved" if old.pending else "amended", old.id)
            await self.inbox.notify_change(db, "request", new.id)
            closed = await written(db, old.id)
            await ledger.append(db, closed, at=now)  # settled (or shown) otherwise: an entry of its own
        self.inbox.emit("resolved" if old.pending else "amended", closed)
        self.inbox.emit("request", new)
        return closed, new

    async def set_delivery(self, request_id: str, delivery: str | None, now: float, *, attempt: bool = False) -> None:
        await self.inbox.database.execute(
            "UPDATE harness_links SET delivery=$1, at=$2, attempts=attempts+$3 WHERE request_id=$4",
            delivery, float(now), 1 if attempt else 0, request_id,
        )

    async def answered_elsewhere(self, request_id: str, by: str, note: str, delivery: str, now: float) -> Record | None:
        """A settled request whose answer the harness no longer took: shown cancelled, with ``note``.

        The original answer stays named in the note; the prompt is edited again (``prompt_edited`` reset), and
        the listeners hear ``amended``.
        """
        async with self.inbox.database.transaction() as db:
            await db.execute(
                "UPDATE harness_links SET delivery=$1, at=$2 WHERE request_id=$3", delivery, float(now), request_id
            )
            if await db.execute(f"{CANCEL}, prompt_edited=0 WHERE id=$4 AND state!=$5",
                                CANCELLED, by, note, request_id, PENDING) != 1:
                return None
            await self.inbox.notify_change(db, "amended", request_id)
            rec = await written(db, request_id)
            await ledger.append(db, rec, at=now)  # the answer the harness did not take: shown cancelled, a new entry
        self.inbox.emit("amended", rec)  # the prompt is edited again; events, webhooks and metrics are told
        return rec
