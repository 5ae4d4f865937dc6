"""The ledger's storage: one entry appended per settlement, inside the settlement's own transaction.

The chain (its hashing, its checks) is :mod:`bot.events.ledger`; here the rows. ``ledger_head`` is one row
(``seq``, ``hash`` of the last entry): each append updates it first, so appends take turns on it (on
PostgreSQL the row lock, held to the commit, serializes daemons; on SQLite the one write transaction), and
the chain has one line, no fork, no gap. Under high availability the fencing term already guards writes.

``PERMISSION_BOT_BENCH_NO_LEDGER=1`` turns appends off (for the latency bench's baseline only).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from typing import Any

from bot.events.ledger import ZERO, line, meaning_of, seal
from bot.events.states import Via
from bot.events.timestamps import iso_ms
from bot.inbox.db import Connection, Database, placeholders
from bot.inbox.record import Record

OFF_ENV = "PERMISSION_BOT_BENCH_NO_LEDGER"
PAGE = 1000


def answered_by(rec: Record) -> list[str]:
    """Who the entry names: empty for a timeout or a cancel, else the record's ``answered_by``."""
    o = rec.outcome
    if o is None or o.via in (Via.TIMEOUT, Via.CANCEL) or not o.answered_by:
        return []
    return [o.answered_by]


def fields(rec: Record, by: Sequence[str] | None = None, at: float | None = None) -> dict[str, Any]:
    """A settled record's ledger fields (not ``seq``, ``prev``, ``hash``); ``by``: who answered, when the
    record's own ``answered_by`` does not say it all (every approver of a quorum, ``rule:N``); ``at``: when,
    if not the record's ``decided_at`` (an answer shown otherwise later)."""
    o = rec.outcome
    assert o is not None
    meaning, scope = meaning_of(rec.options, o.option_id)
    return {
        "at": iso_ms(o.decided_at if at is None else at),
        "request_id": rec.id,
        "room": rec.room,
        "kind": str(getattr(rec, "kind", None) or "permission"),
        "digest": rec.digest,
        "revision": rec.revision,
        "option_id": o.option_id,
        "meaning": meaning,
        "scope": scope,
        "answered_by": list(by) if by is not None else answered_by(rec),
        "via": str(o.via),
        "feedback": o.feedback,
    }


async def append(
    db: Connection, rec: Record, by: Sequence[str] | None = None, *, at: float | None = None
) -> int | None:
    """Append ``rec``'s settlement inside the open transaction ``db``; its seq (None when turned off)."""
    if os.environ.get(OFF_ENV) == "1":
        return None
    row = await db.fetchrow("UPDATE ledger_head SET seq=seq+1 WHERE id=1 RETURNING seq, hash")
    if row is None:  # the first entry: the head row is made then (an empty database stays empty: state migrate)
        await db.execute("INSERT INTO ledger_head (id, seq, hash) VALUES (1, 0, $1) ON CONFLICT (id) DO NOTHING", ZERO)
        row = await db.fetchrow("UPDATE ledger_head SET seq=seq+1 WHERE id=1 RETURNING seq, hash")
        assert row is not None
    seq, prev = int(row[0]), str(row[1])
    assert rec.outcome is not None
    when = rec.outcome.decided_at if at is None else at
    entry = seal(fields(rec, by, when), seq, prev)
    await db.execute(
        "INSERT INTO ledger (seq, at, room, request_id, hash, entry) VALUES ($1,$2,$3,$4,$5,$6)",
        seq, float(when), rec.room, rec.id, entry["hash"], line(entry),
    )
    await db.execute("UPDATE ledger_head SET hash=$1 WHERE id=1", entry["hash"])
    return seq


async def head(database: Database) -> tuple[int, str]:
    """(seq, hash) of the last entry; (0, 64 zeros) when there is none."""
    row = await database.fetchrow("SELECT seq, hash FROM ledger_head WHERE id=1")
    return (int(row[0]), str(row[1])) if row is not None else (0, ZERO)


async def at_of(database: Database, seq: int) -> float | None:
    """When entry ``seq`` was appended."""
    v = await database.fetchval("SELECT at FROM ledger WHERE seq=$1", seq)
    return float(v) if v is not None else None


async def lines(
    database: Database, *, since: float | None = None, rooms: Sequence[str] | None = None, page: int = PAGE
) -> AsyncIterator[str]:
    """The stored entries' JSON lines in seq order, read a page at a time (constant memory); ``since``:
    appended at or after; ``rooms``: only these rooms' entries."""
    after = 0
    where, args = "seq>$1", list[object]()
    if since is not None:
        args.append(float(since))
        where += f" AND at>=${len(args) + 1}"
    if rooms is not None:
        if not rooms:
            return
        marks = placeholders(len(args) + 2, len(rooms))
        args.extend(rooms)
        where += f" AND room IN ({marks})"
    sql = f"SELECT seq, entry FROM ledger WHERE {where} ORDER BY seq LIMIT {int(page)}"
    while True:
        rows = await database.fetch(sql, after, *args)
        for r in rows:
            yield str(r[1])
        if len(rows) < page:
            return
        after = int(rows[-1][0])
