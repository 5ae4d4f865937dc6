"""The inbox part for what the outbox makes visible: a request's prompt event, its settled edit, and the
keycap reactions the bot seeds under it (and clears once it is settled)."""

from __future__ import annotations

from collections.abc import Sequence

from bot.inbox.base import InboxBase
from bot.inbox.db import placeholders
from bot.inbox.record import PENDING, Record

UNPOSTED = "prompt_event_id IS NULL AND post_skipped=0"
"""The WHERE of the requests_unposted index (schema step: backlog indexes): prompts not in the room yet."""

UNSEEDED = "state='pending' AND seeded=0 AND prompt_event_id IS NOT NULL"
"""The WHERE of the requests_unseeded index: prompts in the room whose keycaps are not all seeded yet."""

HOLD_LAPSE = 30.0
"""Seconds after which a request's hold (its rules being applied) lapses: its daemon died before releasing it."""


def needing_edit_sql(shown: bool | None) -> str:
    """``needing_edit(shown=...)``'s query: the WHERE of the requests_unedited index (schema step 9), the state,
    and whether the room shows it settled (``shown``; None: either way)."""
    which = "" if shown is None else (" AND" + ("" if shown else " NOT") + " EXISTS (SELECT 1 FROM timeline t"
                                      " WHERE t.kind='settled' AND t.request_id=requests.id)")
    return ("SELECT * FROM requests WHERE prompt_edited=0 AND decided_at IS NOT NULL AND prompt_event_id IS NOT NULL"
            f" AND state!=$1{which} ORDER BY decided_at LIMIT $2")


class Posting(InboxBase):
    """Prompts to post and edit, reactions to seed and clear."""

    async def set_prompt_event(self, request_id: str, event_id: str, now: float | None = None) -> bool:
        """The prompt is in the room as ``event_id``. Whether the request is still pending: one settled while
        its prompt was on its way needs its edit now (the settle came before there was a prompt to edit)."""
        async with self.database.transaction() as db:
            await db.execute(
                "UPDATE requests SET prompt_event_id=$1, posted_at=$2 WHERE id=$3",
                event_id, None if now is None else float(now), request_id,
            )
            return bool(await db.fetchval("SELECT state FROM requests WHERE id=$1", request_id) == PENDING)

    async def set_posted_settled(self, request_id: str, event_id: str, now: float) -> None:
        """A request settled before its prompt was posted went to the room settled, as one event ``event_id``:
        it is both the prompt and its settled edit (no edit follows)."""
        await self.database.execute(
            "UPDATE requests SET prompt_event_id=$1, posted_at=$2, prompt_edited=1, edit_event_id=$1 WHERE id=$3",
            event_id, float(now), request_id,
        )

    async def skip_post(self, request_id: str) -> None:
        """Never post this (settled) request's prompt: ``prompts.post_rule_settled`` is off."""
        await self.database.execute(
            "UPDATE requests SET post_skipped=1 WHERE id=$1 AND prompt_event_id IS NULL", request_id
        )

    async def mark_edited(self, request_id: str, event_id: str | None = None, shown: Record | None = None) -> None:
        """The prompt's edit ``event_id`` is in the room. ``shown``: the record the edit was made from; an outcome
        amended while it was on its way (a watched harness that did not take the answer) stays to be edited."""
        same = "" if shown is None else " AND state=$3 AND COALESCE(outcome_by, '')=$4"
        args = () if shown is None else (shown.state.value, (shown.outcome.answered_by or "") if shown.outcome else "")
        await self.database.execute(
            "UPDATE requests SET prompt_edited=1, edit_event_id=COALESCE($1, edit_event_id) WHERE id=$2" + same,
            event_id, request_id, *args,
        )

    async def needing_post(
        self, limit: int = 100, held_before: float = float("-inf"), *, newest: bool = False
    ) -> list[Record]:
        """Records whose prompt is not in the room yet (and is to be posted, not held), oldest first (``newest``:
        newest first); a request still held but submitted before ``held_before`` too (its daemon died applying
        its rules). Through the requests_unposted index, from either end: costs what it returns."""
        way = " DESC" if newest else ""
        hint = self._indexed_by("requests_unposted")  # SQLite would take requests_prompt and sort the backlog
        return await self._records(
            f"SELECT * FROM requests{hint} WHERE {UNPOSTED} AND (post_held=0 OR requested_at < $2)"
            f" ORDER BY requested_at{way}, rowid{way} LIMIT $1",
            limit, held_before,
        )

    async def needing_edit(self, limit: int = 100, shown: bool | None = None) -> list[Record]:
        """Settled records whose prompt is in the room and still shows them pending; with ``shown``, only
        those the room already shows settled (True: a ``settled`` mark, their room answer's) or only those
        it does not (False). Through the requests_unedited index: the query repeats its WHERE terms."""
        return await self._records(needing_edit_sql(shown), PENDING, limit)

    # -- reactions the bot seeded ----------------------------------------
    async def add_reaction(self, request_id: str, key: str, event_id: str) -> None:
        await self.database.execute(
            "INSERT INTO reactions (request_id, key, event_id) VALUES ($1, $2, $3) ON CONFLICT (request_id, key)"
            " DO UPDATE SET event_id=excluded.event_id, redacted=0",
            request_id, key, event_id,
        )

    async def needing_seed(self, posted_before: float, limit: int = 8) -> list[Record]:
        """Pending records posted before ``posted_before`` whose keycap reactions are not all seeded yet."""
        return await self._records(  # through requests_unseeded: never a walk over the seeded ones
            f"SELECT * FROM requests{self._indexed_by('requests_unseeded')} WHERE {UNSEEDED}"
            " AND COALESCE(posted_at, 0)<=$1 ORDER BY requested_at, rowid LIMIT $2",
            float(posted_before), limit,
        )

    async def next_seed_due(self) -> float | None:
        """When the oldest unseeded pending prompt was posted."""
        v = await self.database.fetchval(
            f"SELECT MIN(COALESCE(posted_at, 0)) FROM requests{self._indexed_by('requests_unseeded')} WHERE {UNSEEDED}"
        )
        return float(v) if v is not None else None

    async def mark_seeded(self, request_id: str) -> None:
        await self.database.execute("UPDATE requests SET seeded=1 WHERE id=$1", request_id)

    async def reactions_to_clear(
        self, limit: int = 50, request_ids: Sequence[str] | None = None
    ) -> list[tuple[str, str, str]]:
        """(request_id, key, event_id) of seeded reactions on prompts no longer pending; of ``request_ids`` only
        (looked up by their keys: the cost of those, not of every seeded reaction), when given."""
        which = ""
        if request_ids is not None:
            if not request_ids:
                return []
            which = f" AND r.request_id IN ({placeholders(3, len(request_ids))})"
        rows = await self.database.fetch(
            "SELECT r.request_id, r.key, r.event_id FROM reactions r JOIN requests q ON q.id = r.request_id"
            f" WHERE q.state!=$1 AND r.redacted=0 AND r.event_id IS NOT NULL{which} LIMIT $2",
            PENDING, limit, *(request_ids or ()),
        )
        return [(r[0], r[1], r[2]) for r in rows]

    async def reactions(self, request_id: str) -> list[tuple[str, str, bool]]:
        rows = await self.database.fetch(
            "SELECT key, event_id, redacted FROM reactions WHERE request_id=$1 ORDER BY rowid", request_id
        )
        return [(r[0], r[1], bool(r[2])) for r in rows]

    async def mark_reaction_redacted(self, request_id: str, key: str) -> None:
        await self.database.execute("UPDATE reactions SET redacted=1 WHERE request_id=$1 AND key=$2", request_id, key)
