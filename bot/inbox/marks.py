"""The inbox part for the station room's timeline (table ``timeline``, read by :mod:`bot.timeline`):
each event's position, the bot's own events, and the marks a plain answer binds by."""

from __future__ import annotations

from bot.inbox.base import InboxBase
from bot.timeline import Kind, Mark

ANSWERS_KEPT = 50_000
"""Timeline positions of plain messages kept for redelivery (a backfill reaches 20,000 events back)."""


class Marks(InboxBase):
    """Timeline positions and marks."""

    async def place(self, event_id: str, kind: str, request_id: str | None = None) -> int:
        """The event's position in the room timeline: a new one, or the one it got when first seen.

        A position reserved as ``answer`` (an event not decrypted yet) takes the kind it turns out to have.
        """
        async with self._tx() as db:
            await db.execute(
                "INSERT INTO timeline (event_id, kind, request_id) VALUES (?, ?, ?) ON CONFLICT(event_id)"
                " DO UPDATE SET kind=excluded.kind, request_id=excluded.request_id WHERE timeline.kind='answer'",
                (event_id, kind, request_id),
            )
            cur = await db.execute("SELECT pos FROM timeline WHERE event_id=?", (event_id,))
            row = await cur.fetchone()
            assert row is not None
            pos = int(row[0])
            if kind == "answer" and pos % 1000 == 0:  # chat need not be kept long: only a redelivery reads it
                await db.execute("DELETE FROM timeline WHERE kind='answer' AND pos<?", (pos - ANSWERS_KEPT,))
        return pos

    async def own_event(self, event_id: str) -> tuple[Kind, str] | None:
        """("posted" | "settled", request_id) when ``event_id`` is one of the bot's prompts or settled edits."""
        cur = await self.db.execute(
            "SELECT 'posted', id FROM requests WHERE prompt_event_id=?"
            " UNION ALL SELECT 'settled', id FROM requests WHERE edit_event_id=? LIMIT 1",
            (event_id, event_id),
        )
        row = await cur.fetchone()
        if row is None:
            return None
        return ("posted" if row[0] == "posted" else "settled"), str(row[1])

    async def marks_before(self, at: int) -> list[Mark]:
        """What :func:`bot.timeline.bind` needs at ``at``: the postings not settled before it, the last mark
        (and its request's settles)."""
        cur = await self.db.execute(
            "SELECT pos, kind, request_id FROM timeline p WHERE kind='posted' AND pos<? AND NOT EXISTS"
            " (SELECT 1 FROM timeline s WHERE s.kind='settled' AND s.request_id=p.request_id AND s.pos<?)"
            " UNION SELECT * FROM (SELECT pos, kind, request_id FROM timeline WHERE kind!='answer' AND pos<?"
            " ORDER BY pos DESC LIMIT 1)"
            " UNION SELECT pos, kind, request_id FROM timeline WHERE kind='settled' AND pos<? AND request_id ="
            " (SELECT request_id FROM timeline WHERE kind!='answer' AND pos<? ORDER BY pos DESC LIMIT 1)",
            (at, at, at, at, at),
        )
        return [Mark(int(r[0]), r[1], r[2]) for r in await cur.fetchall()]
