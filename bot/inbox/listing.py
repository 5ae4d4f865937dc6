"""The inbox part that lists pending records: all of them, or a page by the keyset cursor of
``bot/inbox/pages.py`` (over the ``requests_state`` index; ``requests_state_key`` on PostgreSQL), as records or
as the API's JSON array."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any

from bot.events.timestamps import iso_ms
from bot.inbox.base import InboxBase, row_to_record
from bot.inbox.db import placeholders
from bot.inbox.pages import Key
from bot.inbox.record import PENDING, Record

BRIEF_TEXT = ("id", "session_id", "label", "title", "tool_kind", "tool_name", "room", "kind")
BRIEF = (*BRIEF_TEXT, "raw_input", "requested_at")
"""The fields of a brief record (``GET /permissions?view=brief``): what `permissions ls` prints."""

_PAIRS = ", ".join(f"'{k}', {k}" for k in BRIEF_TEXT)
BRIEF_SQLITE = f"json_object({_PAIRS}, 'raw_input', json(raw_input))"
BRIEF_POSTGRES = (
    f"(SELECT row_to_json(b)::text FROM (SELECT {', '.join(BRIEF_TEXT)}, raw_input::json AS raw_input) AS b)"
)
"""A brief record's JSON but its requested_at, made by each engine: the same bytes (compact, non-ASCII as is).
On PostgreSQL row_to_json, as SQLite's json_object writes (json_build_object puts spaces around its colons, and
is slower: it looks up each argument's type again for every row)."""


def _where(
    session: str | None, room: str | None, first: int, rooms: Collection[str] | None = None
) -> tuple[str, tuple[Any, ...]]:
    """The filters as SQL (`` AND ...``, placeholders numbered from ``$first``) and their arguments;
    ``rooms``: only these rooms (the caller's; None: every room)."""
    where: str = ""
    args: tuple[Any, ...] = ()
    if session is not None:
        where, args = f" AND (session_id=${first} OR label=${first})", (session,)
    if room is not None:
        where, args = f"{where} AND room=${first + len(args)}", (*args, room)
    if rooms is not None:
        names = sorted(rooms)
        marks = placeholders(first + len(args), len(names))
        where, args = (f"{where} AND room IN ({marks})" if names else f"{where} AND 1=0"), (*args, *names)
    return where, args


class Listing(InboxBase):
    """Pending records, oldest first."""

    async def pending(
        self, session: str | None = None, room: str | None = None, rooms: Collection[str] | None = None
    ) -> list[Record]:
        """Pending records, oldest first; ``session`` matches the id or the label; ``room`` the station room;
        ``rooms`` limits them to those rooms."""
        where, args = _where(session, room, 2, rooms)
        return await self._records(
            f"SELECT * FROM requests WHERE state=$1{where} ORDER BY requested_at, rowid", PENDING, *args
        )

    async def pending_of_session(self, session_id: str, room: str | None = None) -> list[Record]:
        """The pending requests of one session id (not its label), oldest first: through the
        (session_id, request_seq) key, so it costs the session's requests, not the inbox's."""
        where, args = ("", ()) if room is None else (" AND room=$3", (room,))
        return await self._records(
            f"SELECT * FROM requests WHERE session_id=$1 AND state=$2{where} ORDER BY requested_at, rowid",
            session_id, PENDING, *args,
        )

    async def pending_newest(self, limit: int, room: str | None = None) -> list[Record]:
        """Up to ``limit`` pending records, newest first (the requests_state index read backwards)."""
        where, args = ("", ()) if room is None else (" AND room=$3", (room,))
        return await self._records(
            f"SELECT * FROM requests WHERE state=$1{where} ORDER BY requested_at DESC, rowid DESC LIMIT $2",
            PENDING, limit, *args,
        )

    async def count_pending_upto(self, most: int, room: str | None = None) -> int:
        """How many requests are pending (in ``room``), counting no further than ``most``."""
        where, args = ("", ()) if room is None else (" AND room=$3", (room,))
        return int(await self.database.fetchval(
            f"SELECT COUNT(*) FROM (SELECT 1 FROM requests WHERE state=$1{where} LIMIT $2) AS upto",
            PENDING, most, *args,
        ) or 0)

    async def pending_json(
        self, limit: int | None = None, after: Key | None = None, session: str | None = None,
        room: str | None = None, rooms: Collection[str] | None = None,
    ) -> tuple[bytes, Key | None]:
        """Up to ``limit`` pending records (all of them without one; only ``rooms``, when given) after the key
        ``after`` (oldest first), as the API's JSON array, and the key to continue from (None on the last page):
        a keyset query over the ``requests_state`` index (bot/inbox/pages.py). Each record's JSON is kept
        while its row is unchanged, so a listing encodes only what changed."""
        rows, nxt = await self._pending_rows(limit, after, session, room, rooms)
        return self._json.array(rows, lambda r: json.dumps(row_to_record(r).to_api())), nxt  # ASCII, as before

    async def pending_brief_json(
        self, limit: int, after: Key | None = None, session: str | None = None, room: str | None = None,
        rooms: Collection[str] | None = None,
    ) -> tuple[bytes, Key | None]:
        """As ``pending_json``, each record cut to the ``BRIEF`` fields (what `permissions ls` prints): the
        columns it needs alone, made JSON by the database, the same bytes on both engines (compact, non-ASCII
        as is), so a page costs a fraction of the full one."""
        brief = BRIEF_POSTGRES if self.database.dialect.is_postgres else BRIEF_SQLITE
        columns = f"requested_at, {brief} AS brief"
        rows, nxt = await self._pending_rows(limit, after, session, room, rooms, columns=columns)
        parts = [f'{r["brief"][:-1]},"requested_at":"{iso_ms(r["requested_at"])}"}}' for r in rows]
        return ("[" + ",".join(parts) + "]").encode(), nxt

    async def _pending_rows(
        self, limit: int | None, after: Key | None, session: str | None, room: str | None = None,
        rooms: Collection[str] | None = None, columns: str = "*",
    ) -> tuple[list[Any], Key | None]:
        at, rowid = after if after is not None else (float("-inf"), -1)
        filters, more = _where(session, room, 4, rooms)
        where = "state=$1 AND (requested_at, rowid) > ($2, $3)" + filters
        args: tuple[Any, ...] = (PENDING, float(at), int(rowid), *more)
        sql = f"SELECT rowid AS _key, {columns} FROM requests WHERE {where} ORDER BY requested_at, rowid"
        if limit is not None:  # no LIMIT at all without one (LIMIT -1 is an error on PostgreSQL)
            sql, args = sql + f" LIMIT ${len(args) + 1}", (*args, limit + 1)
        fetch = self.database.fetch if limit is None else self._fetch_page  # all of them: one sort is fine
        rows = list(await fetch(sql, *args))
        if limit is None or len(rows) <= limit:
            return rows, None
        rows = rows[:limit]
        return rows, (float(rows[-1]["requested_at"]), int(rows[-1]["_key"]))

    async def _fetch_page(self, sql: str, *args: Any) -> Sequence[Any]:
        """A keyset page's rows, read in index order on PostgreSQL (``requests_state_key``, whose rowid ends the
        key as SQLite's implied one does) whatever the planner's statistics say: without them (a table just
        filled, copied or migrated) it takes the pending rows for a few dozen and sorts every one of them for
        each page, so a listing's time grew with the square of the backlog. Sorting is off for this read
        alone (``SET LOCAL``, in a transaction of its own); an index scan stops at the page's end."""
        if not self.database.dialect.is_postgres or self.database.in_transaction():
            return await self.database.fetch(sql, *args)
        async with self.database.transaction() as db:
            await db.execute("SET LOCAL enable_sort = off")
            return await db.fetch(sql, *args)
