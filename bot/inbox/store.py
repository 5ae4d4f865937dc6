"""The durable inbox: SQLite (WAL) through aiosqlite, one transaction per state change.

It is the only place that decides a request's state. A request leaves
``pending`` at most once: settling is a conditional UPDATE checked by rowcount.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite

from bot.inbox.pages import JsonKept, Key
from bot.inbox.record import CANCELLED, EXPIRED, PENDING, RESOLVED, Outcome, Record, dumps
from bot.inbox.schema import upgrade
from bot.inbox.states import State, Via
from bot.inbox.submission import Submission
from bot.timeline import Kind, Mark

Listener = Callable[[str, Record], None]

ANSWERS_KEPT = 50_000
"""Timeline positions of plain messages kept for redelivery (a backfill reaches 20,000 events back)."""


def _row_to_record(r: aiosqlite.Row) -> Record:
    outcome = None
    if r["outcome_via"] is not None:
        outcome = Outcome(
            option_id=r["outcome_option_id"],
            answered_by=r["outcome_by"],
            via=Via(r["outcome_via"]),
            feedback=r["outcome_feedback"],
            decided_at=r["decided_at"],
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
    )


class Inbox:
    """Requests, their states and outcomes, seq counters, handled events, sync token."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: aiosqlite.Connection | None = None
        self._read: aiosqlite.Connection | None = None  # reads: only what is committed (WAL snapshots)
        self._lock = asyncio.Lock()
        self._listeners: list[Listener] = []
        self._changed: dict[str, asyncio.Event] = {}
        self._json = JsonKept()  # pending records' API JSON, for GET /permissions

    # -- lifecycle -------------------------------------------------------
    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = await aiosqlite.connect(self.path, isolation_level=None)
        self._db.row_factory = aiosqlite.Row
        await self._db.execute("PRAGMA journal_mode=WAL")
        await self._db.execute("PRAGMA synchronous=NORMAL")
        await self._db.execute("PRAGMA busy_timeout=5000")
        await upgrade(self._db, str(self.path))
        self._read = await aiosqlite.connect(Path(self.path).resolve().as_uri() + "?mode=ro", uri=True,
                                             isolation_level=None)
        self._read.row_factory = aiosqlite.Row
        await self._read.execute("PRAGMA busy_timeout=5000")

    async def open_read_only(self) -> None:
        """Open an existing inbox to read only (doctor): no folder made, no upgrade; writes fail (no writer)."""
        self._read = await aiosqlite.connect(self.path.resolve().as_uri() + "?mode=ro", uri=True,
                                             isolation_level=None)
        self._read.row_factory = aiosqlite.Row
        await self._read.execute("PRAGMA busy_timeout=5000")

    async def close(self) -> None:
        if self._read is not None:
            await self._read.close()
            self._read = None
        if self._db is not None:
            await self._db.close()
            self._db = None

    @property
    def reader(self) -> aiosqlite.Connection:
        """The connection reads outside a transaction use: it never sees a write not yet committed."""
        assert self._read is not None, "inbox not open"
        return self._read

    async def _read_rows(self, sql: str, args: tuple[Any, ...] = ()) -> _Rows:
        """Run a read on ``reader``, its cursor closed at once (an open one would pin an old snapshot)."""
        async with self.reader.execute(sql, args) as cur:
            return _Rows(list(await cur.fetchall()))

    @property
    def db(self) -> aiosqlite.Connection:
        assert self._db is not None, "inbox not open"
        return self._db

    @asynccontextmanager
    async def _tx(self) -> AsyncIterator[aiosqlite.Connection]:
        async with self._lock:
            await self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
                await self.db.execute("COMMIT")
            except BaseException:
                if self.db.in_transaction:  # also when COMMIT itself failed (a full or read-only disk)
                    await self.db.execute("ROLLBACK")
                raise

    # -- change notification --------------------------------------------
    def listen(self, fn: Listener) -> None:
        """Call ``fn(kind, record)`` after each committed change (kind: request/resolved)."""
        self._listeners.append(fn)

    def _emit(self, kind: str, rec: Record) -> None:
        ev = self._changed.pop(rec.id, None)
        if ev is not None and kind == "resolved":
            ev.set()
        elif ev is not None:
            self._changed[rec.id] = ev
        for fn in self._listeners:
            fn(kind, rec)

    async def wait_settled(self, request_id: str, timeout: float) -> Record | None:
        """The record once it is no longer pending, or as it is when ``timeout`` runs out."""
        ev = self._changed.setdefault(request_id, asyncio.Event())
        rec = await self.get(request_id)
        if rec is None or not rec.pending or timeout <= 0:
            if not ev.is_set() and self._changed.get(request_id) is ev and (rec is None or not rec.pending):
                del self._changed[request_id]
            return rec
        try:
            await asyncio.wait_for(ev.wait(), timeout)
        except TimeoutError:
            pass
        return await self.get(request_id)

    # -- requests --------------------------------------------------------
    async def submit(
        self, sub: Submission, now: float, timeout: float, submitted_by: str | None = None
    ) -> tuple[Record, bool]:
        """Store a new request with the next seq of its session; idempotent on (session, key).

        ``submitted_by`` names the API token that submitted it."""
        async with self._tx() as db:
            rec, created = await self.insert(db, sub, now, timeout, submitted_by)
        if created:
            self._emit("request", rec)
        return rec, created

    def transaction(self) -> AbstractAsyncContextManager[aiosqlite.Connection]:
        """One write transaction (for inbox parts such as ``bot.inbox.links``); call ``emit`` after it."""
        return self._tx()

    def emit(self, kind: str, rec: Record) -> None:
        """Tell the listeners about a change committed through ``transaction``."""
        self._emit(kind, rec)

    async def insert(
        self, db: aiosqlite.Connection, sub: Submission, now: float, timeout: float, submitted_by: str | None = None
    ) -> tuple[Record, bool]:
        """``submit``'s work inside an open transaction: (record, created); nothing emitted."""
        if sub.key is not None:
            cur = await db.execute(
                "SELECT * FROM requests WHERE session_id=? AND key=?", (sub.session_id, sub.key)
            )
            row = await cur.fetchone()
            if row is not None:
                return _row_to_record(row), False
        cur = await db.execute(
            "INSERT INTO seq (session_id, last) VALUES (?, 1) "
            "ON CONFLICT(session_id) DO UPDATE SET last = last + 1 RETURNING last",
            (sub.session_id,),
        )
        row = await cur.fetchone()
        assert row is not None
        seq = int(row[0])
        cur = await db.execute(
            "SELECT COUNT(*) FROM requests WHERE session_id=? AND tool_call_id=?",
            (sub.session_id, sub.tool_call_id),
        )
        row = await cur.fetchone()
        revision = 1 + int(row[0] if row else 0)
        rid = f"{sub.session_id}:{seq}"
        await db.execute(
            "INSERT INTO requests (id, session_id, request_seq, key, label, tool_call_id, title, tool_kind,"
            " tool_name, options, raw_input, locations, content, params, digest, revision, state,"
            " requested_at, expires_at, cwd, submitted_by) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                rid, sub.session_id, seq, sub.key, sub.label, sub.tool_call_id, sub.title, sub.tool_kind,
                sub.tool_name, dumps(sub.options),
                None if sub.raw_input is None else dumps(sub.raw_input),
                dumps(sub.locations), dumps(sub.content), dumps(sub.params), sub.digest, revision,
                PENDING, now, now + timeout, sub.cwd, submitted_by,
            ),
        )
        cur = await db.execute("SELECT * FROM requests WHERE id=?", (rid,))
        row = await cur.fetchone()
        assert row is not None
        return _row_to_record(row), True

    async def get(self, request_id: str) -> Record | None:
        cur = await self._read_rows("SELECT * FROM requests WHERE id=?", (request_id,))
        row = await cur.fetchone()
        return _row_to_record(row) if row else None

    async def by_prompt_event(self, event_id: str) -> Record | None:
        cur = await self._read_rows("SELECT * FROM requests WHERE prompt_event_id=?", (event_id,))
        row = await cur.fetchone()
        return _row_to_record(row) if row else None

    async def pending(self, session: str | None = None) -> list[Record]:
        """Pending records, oldest first; ``session`` matches the id or the label."""
        if session is None:
            cur = await self._read_rows(
                "SELECT * FROM requests WHERE state=? ORDER BY requested_at, rowid", (PENDING,)
            )
        else:
            cur = await self._read_rows(
                "SELECT * FROM requests WHERE state=? AND (session_id=? OR label=?) ORDER BY requested_at, rowid",
                (PENDING, session, session),
            )
        return [_row_to_record(r) for r in await cur.fetchall()]

    async def pending_page(
        self, limit: int, after: Key | None = None, session: str | None = None
    ) -> tuple[list[Record], Key | None]:
        """Up to ``limit`` pending records after the key ``after`` (oldest first) and the key to continue
        from (None on the last page): a keyset query over the ``requests_state`` index (bot/inbox/pages.py)."""
        rows, nxt = await self._pending_rows(limit, after, session)
        return [_row_to_record(r) for r in rows], nxt

    async def pending_json(
        self, limit: int | None = None, after: Key | None = None, session: str | None = None
    ) -> tuple[bytes, Key | None]:
        """As ``pending_page`` (all of them without ``limit``), as the API's JSON array: each record's JSON is
        kept while its row is unchanged, so a listing encodes only what changed since the last one."""
        rows, nxt = await self._pending_rows(limit, after, session)
        return self._json.array(rows, lambda r: json.dumps(_row_to_record(r).to_api())), nxt  # ASCII, as before

    async def _pending_rows(
        self, limit: int | None, after: Key | None, session: str | None
    ) -> tuple[list[Any], Key | None]:
        at, rowid = after if after is not None else (float("-inf"), -1)
        where = "state=? AND (requested_at, rowid) > (?, ?)"
        args: tuple[Any, ...] = (PENDING, at, rowid)
        if session is not None:
            where += " AND (session_id=? OR label=?)"
            args += (session, session)
        cur = await self._read_rows(
            f"SELECT rowid AS _key, * FROM requests WHERE {where} ORDER BY requested_at, rowid LIMIT ?",
            (*args, -1 if limit is None else limit + 1),
        )
        rows = list(await cur.fetchall())
        if limit is None or len(rows) <= limit:
            return rows, None
        rows = rows[:limit]
        return rows, (float(rows[-1]["requested_at"]), int(rows[-1]["_key"]))

    async def count_pending(self) -> int:
        cur = await self._read_rows("SELECT COUNT(*) FROM requests WHERE state=?", (PENDING,))
        row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def settle(
        self,
        request_id: str,
        *,
        option_id: str | None,
        by: str,
        via: Via,
        feedback: str | None,
        now: float,
        state: State | None = None,
        event_id: str | None = None,
    ) -> Record | None:
        """Leave ``pending`` once. Returns the settled record, or None when it was not pending.

        ``state`` defaults to resolved (cancelled when ``option_id`` is None). ``event_id``,
        when given, is marked handled in the same transaction.
        """
        if state is None:
            state = RESOLVED if option_id is not None else CANCELLED
        assert state in (RESOLVED, EXPIRED, CANCELLED)
        async with self._tx() as db:
            if event_id is not None:
                await db.execute("INSERT OR IGNORE INTO handled (event_id, at) VALUES (?, ?)", (event_id, now))
            cur = await db.execute(
                "UPDATE requests SET state=?, outcome_option_id=?, outcome_by=?, outcome_via=?,"
                " outcome_feedback=?, decided_at=? WHERE id=? AND state=?",
                (state, option_id, by, via, feedback, now, request_id, PENDING),
            )
            if cur.rowcount != 1:
                return None
            cur = await db.execute("SELECT * FROM requests WHERE id=?", (request_id,))
            row = await cur.fetchone()
            assert row is not None
            rec = _row_to_record(row)
        self._emit("resolved", rec)
        return rec

    async def set_prompt_event(self, request_id: str, event_id: str, now: float | None = None) -> None:
        async with self._tx() as db:
            await db.execute(
                "UPDATE requests SET prompt_event_id=?, posted_at=? WHERE id=?", (event_id, now, request_id)
            )

    async def mark_edited(self, request_id: str, event_id: str | None = None) -> None:
        async with self._tx() as db:
            await db.execute(
                "UPDATE requests SET prompt_edited=1, edit_event_id=COALESCE(?, edit_event_id) WHERE id=?",
                (event_id, request_id),
            )

    async def needing_post(self, limit: int = 100) -> list[Record]:
        """Records whose prompt is not in the room yet, oldest first."""
        cur = await self._read_rows(
            "SELECT * FROM requests WHERE prompt_event_id IS NULL ORDER BY requested_at, rowid LIMIT ?",
            (limit,),
        )
        return [_row_to_record(r) for r in await cur.fetchall()]

    async def needing_edit(self, limit: int = 100) -> list[Record]:
        """Settled records whose prompt still shows them pending."""
        cur = await self._read_rows(
            "SELECT * FROM requests WHERE state!=? AND prompt_event_id IS NOT NULL AND prompt_edited=0"
            " ORDER BY decided_at LIMIT ?",
            (PENDING, limit),
        )
        return [_row_to_record(r) for r in await cur.fetchall()]

    async def due(self, now: float) -> list[Record]:
        """Pending records whose time is up."""
        cur = await self._read_rows(
            "SELECT * FROM requests WHERE state=? AND expires_at<=? ORDER BY expires_at", (PENDING, now)
        )
        return [_row_to_record(r) for r in await cur.fetchall()]

    async def next_expiry(self) -> float | None:
        cur = await self._read_rows("SELECT MIN(expires_at) FROM requests WHERE state=?", (PENDING,))
        row = await cur.fetchone()
        return float(row[0]) if row and row[0] is not None else None

    async def resolved_counts(self) -> dict[tuple[str, str], int]:
        """(state, via) -> how many, for metrics."""
        cur = await self._read_rows(
            "SELECT state, outcome_via, COUNT(*) FROM requests WHERE state!=? GROUP BY state, outcome_via",
            (PENDING,),
        )
        return {(r[0], r[1] or ""): int(r[2]) for r in await cur.fetchall()}

    # -- reactions the bot seeded ----------------------------------------
    async def add_reaction(self, request_id: str, key: str, event_id: str) -> None:
        async with self._tx() as db:
            await db.execute(
                "INSERT OR REPLACE INTO reactions (request_id, key, event_id) VALUES (?, ?, ?)",
                (request_id, key, event_id),
            )

    async def needing_seed(self, posted_before: float, limit: int = 8) -> list[Record]:
        """Pending records posted before ``posted_before`` whose keycap reactions are not all seeded yet."""
        cur = await self._read_rows(
            "SELECT * FROM requests WHERE state=? AND seeded=0 AND prompt_event_id IS NOT NULL"
            " AND prompt_event_id!='' AND COALESCE(posted_at, 0)<=? ORDER BY requested_at, rowid LIMIT ?",
            (PENDING, posted_before, limit),
        )
        return [_row_to_record(r) for r in await cur.fetchall()]

    async def next_seed_due(self) -> float | None:
        """When the oldest unseeded pending prompt was posted."""
        cur = await self._read_rows(
            "SELECT MIN(COALESCE(posted_at, 0)) FROM requests WHERE state=? AND seeded=0"
            " AND prompt_event_id IS NOT NULL AND prompt_event_id!=''",
            (PENDING,),
        )
        row = await cur.fetchone()
        return float(row[0]) if row and row[0] is not None else None

    async def mark_seeded(self, request_id: str) -> None:
        async with self._tx() as db:
            await db.execute("UPDATE requests SET seeded=1 WHERE id=?", (request_id,))

    async def reactions_to_clear(self, limit: int = 50) -> list[tuple[str, str, str]]:
        """(request_id, key, event_id) of seeded reactions on prompts no longer pending."""
        cur = await self._read_rows(
            "SELECT r.request_id, r.key, r.event_id FROM reactions r JOIN requests q ON q.id = r.request_id"
            " WHERE q.state!=? AND r.redacted=0 AND r.event_id IS NOT NULL LIMIT ?",
            (PENDING, limit),
        )
        return [(r[0], r[1], r[2]) for r in await cur.fetchall()]

    async def reactions(self, request_id: str) -> list[tuple[str, str, bool]]:
        cur = await self._read_rows(
            "SELECT key, event_id, redacted FROM reactions WHERE request_id=? ORDER BY rowid", (request_id,)
        )
        return [(r[0], r[1], bool(r[2])) for r in await cur.fetchall()]

    async def mark_reaction_redacted(self, request_id: str, key: str) -> None:
        async with self._tx() as db:
            await db.execute("UPDATE reactions SET redacted=1 WHERE request_id=? AND key=?", (request_id, key))

    # -- the room timeline (bot.timeline) ----------------------------------
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

    # -- handled events and key/value -------------------------------------
    async def is_handled(self, event_id: str) -> bool:
        cur = await self._read_rows("SELECT 1 FROM handled WHERE event_id=?", (event_id,))
        return await cur.fetchone() is not None

    async def mark_handled(self, event_id: str, now: float) -> bool:
        """Remember an event; False when it was already handled."""
        async with self._tx() as db:
            cur = await db.execute("INSERT OR IGNORE INTO handled (event_id, at) VALUES (?, ?)", (event_id, now))
            return cur.rowcount == 1

    async def park(self, event_id: str, source: dict[str, Any], now: float) -> None:
        """Keep an event that answers a prompt whose event id is not recorded yet."""
        async with self._tx() as db:
            await db.execute(
                "INSERT OR IGNORE INTO parked (event_id, source, at) VALUES (?, ?, ?)", (event_id, dumps(source), now)
            )

    async def take_parked(self) -> list[dict[str, Any]]:
        """Every parked event, oldest first, removed from the parking."""
        async with self._tx() as db:
            cur = await db.execute("SELECT source FROM parked ORDER BY at, rowid")
            rows = await cur.fetchall()
            await db.execute("DELETE FROM parked")
        return [json.loads(r[0]) for r in rows]

    async def get_kv(self, k: str) -> str | None:
        cur = await self._read_rows("SELECT v FROM kv WHERE k=?", (k,))
        row = await cur.fetchone()
        return str(row[0]) if row else None

    async def kv_with_prefix(self, prefix: str) -> dict[str, str]:
        """Every kv entry whose key starts with ``prefix``, by key."""
        cur = await self._read_rows("SELECT k, v FROM kv WHERE substr(k, 1, ?) = ?", (len(prefix), prefix))
        return {str(k): str(v) for k, v in await cur.fetchall()}

    async def set_kv(self, k: str, v: str) -> None:
        async with self._tx() as db:
            await db.execute("INSERT INTO kv (k, v) VALUES (?, ?) ON CONFLICT(k) DO UPDATE SET v=excluded.v", (k, v))

    async def get_json(self, k: str) -> Any:
        v = await self.get_kv(k)
        return json.loads(v) if v is not None else None

    async def set_json(self, k: str, v: Any) -> None:
        await self.set_kv(k, dumps(v))


class _Rows:
    """A read's rows, fetched: the cursor-like answer of ``Inbox._read_rows``."""

    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    async def fetchone(self) -> Any:
        return self.rows[0] if self.rows else None

    async def fetchall(self) -> list[Any]:
        return self.rows


__all__ = ["CANCELLED", "EXPIRED", "PENDING", "RESOLVED", "Inbox"]
