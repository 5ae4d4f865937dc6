"""The inbox part for the station room's timeline (table ``timeline``, read by :mod:`bot.answers.timeline`):
each event's position, the bot's own events, and the marks a plain answer binds by."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bot.inbox.base import InboxBase
from bot.inbox.db import Connection

Kind = Literal["posted", "settled", "lookalike", "answer"]


@dataclass(frozen=True)
class Mark:
    """A sighting with its position in the room timeline."""

    pos: int
    kind: Kind
    request_id: str | None = None


ANSWERS_KEPT = 50_000
"""Timeline positions of plain messages kept for redelivery (a backfill reaches 20,000 events back)."""


async def mark_settled_at(db: Connection, event_id: str, request_id: str) -> None:
    """The answer ``event_id`` settled ``request_id``: its place marks it settled (the place it was given, or,
    never placed, the next one: events are handled in sync order, so that is where it sits)."""
    changed = await db.execute(
        "INSERT INTO timeline (event_id, kind, request_id, room) SELECT $1, 'settled', id, room FROM requests"
        " WHERE id=$2 ON CONFLICT(event_id) DO UPDATE SET kind='settled', request_id=excluded.request_id"
        " WHERE timeline.kind='answer'",
        event_id, request_id,
    )
    if changed == 0:  # its place holds something else (a look-alike): the next place (never looser)
        await db.execute(
            "INSERT OR IGNORE INTO timeline (event_id, kind, request_id, room)"
            " SELECT $1, 'settled', id, room FROM requests WHERE id=$2",
            f"{event_id}#settled", request_id,
        )


class Marks(InboxBase):
    """Timeline positions and marks."""

    _answers_cleaned: int | None = None  # the thousand of positions the last clean-up of old answers ran at

    async def place(self, event_id: str, kind: str, request_id: str | None = None, room: str = "default") -> int:
        """The event's position in ``room``'s timeline: a new one, or the one it got when first seen.

        A position reserved as ``answer`` (an event not decrypted yet) takes the kind it turns out to have.
        Positions are shared by every room (one counter) and compared only within one room.
        """
        async with self.database.transaction() as db:
            await db.execute(
                "INSERT INTO timeline (event_id, kind, request_id, room) VALUES ($1, $2, $3, $4) ON CONFLICT(event_id)"
                " DO UPDATE SET kind=excluded.kind, request_id=excluded.request_id WHERE timeline.kind='answer'",
                event_id, kind, request_id, room,
            )
            pos = int(await db.fetchval("SELECT pos FROM timeline WHERE event_id=$1", event_id))
            # chat need not be kept long: only a redelivery reads it. Once per thousand positions (PostgreSQL's
            # identities have gaps, so not at a multiple of 1000: whenever the thousands moved on)
            if kind == "answer" and pos // 1000 != self._answers_cleaned:
                self._answers_cleaned = pos // 1000
                await db.execute("DELETE FROM timeline WHERE kind='answer' AND pos<$1", pos - ANSWERS_KEPT)
        return pos

    async def own_event(self, event_id: str) -> tuple[Kind, str] | None:
        """("posted" | "settled", request_id) when ``event_id`` is one of the bot's prompts or settled edits."""
        row = await self.database.fetchrow(
            "SELECT 0 AS o, 'settled' AS k, id FROM requests WHERE edit_event_id=$1"  # a prompt posted settled
            " UNION ALL SELECT 1, 'posted', id FROM requests WHERE prompt_event_id=$1 ORDER BY o LIMIT 1",  # is both
            event_id,
        )
        if row is None:
            return None
        return ("posted" if row[1] == "posted" else "settled"), str(row[2])

    async def unmark(self, withdrawn: str, by: str, event_id: str) -> str | None:
        """``by`` redacted (or edited) their own answer ``withdrawn``: when that answer settled a request (its
        ``settled`` mark), the room no longer shows it, so the mark goes, and ``event_id``'s place counts as
        a change above (``lookalike``). Returns that request's id, else None. Anyone else's redaction or edit
        of it changes nothing here (a client shows an edit only from the sender; the bot's edits are kept)."""
        ids = (withdrawn, f"{withdrawn}#settled")
        find = (
            "SELECT t.request_id FROM timeline t JOIN requests r ON r.id=t.request_id WHERE t.event_id IN ($1, $2)"
            " AND t.kind='settled' AND r.outcome_by=$3 AND (r.edit_event_id IS NULL OR r.edit_event_id!=$4)"
        )
        args = (*ids, by, withdrawn)
        if await self.database.fetchrow(find, *args) is None:  # most redactions (the bot's keycap clean-up) end here
            return None
        async with self.database.transaction() as db:
            row = await db.fetchrow(find, *args)
            if row is None:
                return None
            await db.execute("UPDATE timeline SET kind='answer' WHERE event_id IN ($1, $2) AND kind='settled'", *ids)
            await db.execute(
                "INSERT INTO timeline (event_id, kind, room) SELECT $1, 'lookalike', room FROM requests WHERE id=$2"
                " ON CONFLICT(event_id) DO UPDATE SET kind='lookalike', request_id=NULL WHERE timeline.kind='answer'",
                event_id, row[0],
            )
        return str(row[0])

    async def marks_before(self, at: int, room: str = "default") -> list[Mark]:
        """What :func:`bot.answers.timeline.bind` needs at ``at`` in ``room``: the newest postings not settled
        before it, as far back as two requests (more change nothing: two are "several"), the last mark that
        counts (and its request's settles). Another room's marks never count."""
        last = (  # the last mark that counts (bot.answers.timeline.bind: a request's second settle does not)
            "SELECT pos, kind, request_id FROM timeline t WHERE room=$1 AND kind!='answer' AND pos<$2 AND NOT"
            " (kind='settled' AND EXISTS (SELECT 1 FROM timeline e WHERE e.kind='settled'"
            " AND e.request_id=t.request_id AND e.pos<t.pos)) ORDER BY pos DESC LIMIT 1"
        )
        open_ = (  # the postings not settled before it, newest first: two requests among them are "several"
            "SELECT pos, kind, request_id FROM timeline p WHERE room=$1 AND kind='posted' AND pos<$2 AND NOT EXISTS"
            " (SELECT 1 FROM timeline s WHERE s.kind='settled' AND s.request_id=p.request_id AND s.pos<$2)"
            " ORDER BY pos DESC LIMIT $3"
        )
        n = 8
        while len(opened := await self.database.fetch(open_, room, at, n)) == n and len({r[2] for r in opened}) < 2:
            n *= 8  # one request posted again and again (rare): read further back
        rows = [*opened, *await self.database.fetch(
            f"SELECT * FROM ({last}) AS l1"
            " UNION SELECT pos, kind, request_id FROM timeline WHERE room=$1 AND kind='settled' AND pos<$2"
            f" AND request_id = (SELECT request_id FROM ({last}) AS l2)",
            room, at,
        )]
        return [Mark(int(r[0]), r[1], r[2]) for r in rows]
