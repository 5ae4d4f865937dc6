"""The inbox schema's steps whose SQLite body is Python, not one script (bot.inbox.schema's ``STEPS`` uses
them), and the SQL they share with the PostgreSQL side of their step.

Each SQLite body adds a column only when it is missing: a folder whose version was set back by hand (or by an
older release) may have it already. Named after what they do; never edit one that shipped.
"""

from __future__ import annotations

from bot.inbox.db import Connection


async def _columns(db: Connection, table: str) -> set[str]:
    return {str(r[1]) for r in await db.fetch(f"PRAGMA table_info({table})")}


async def posted_at_and_parking_sqlite(db: Connection) -> None:
    # Unversioned folders may already have these (they were added in place before versions existed).
    if "posted_at" not in await _columns(db, "requests"):
        await db.execute("ALTER TABLE requests ADD COLUMN posted_at REAL")
    await db.execute(
        "CREATE TABLE IF NOT EXISTS parked (event_id TEXT PRIMARY KEY, source TEXT NOT NULL, at REAL NOT NULL)"
    )


async def rooms_sqlite(db: Connection) -> None:
    # A folder whose version was set back by hand (or by an older release) may have the columns already.
    for table in ("requests", "timeline"):
        if "room" not in await _columns(db, table):
            await db.execute(f"ALTER TABLE {table} ADD COLUMN room TEXT NOT NULL DEFAULT 'default'")
    await db.execute("CREATE INDEX IF NOT EXISTS timeline_room ON timeline (room, kind, pos)")


LEDGER_DDL = (
    "CREATE TABLE IF NOT EXISTS ledger (seq INTEGER PRIMARY KEY, at {REAL} NOT NULL, room TEXT NOT NULL,"
    " request_id TEXT NOT NULL, hash TEXT NOT NULL, entry TEXT NOT NULL);"
    " CREATE INDEX IF NOT EXISTS ledger_at ON ledger (at);"
    " CREATE TABLE IF NOT EXISTS ledger_head (id INTEGER PRIMARY KEY, seq INTEGER NOT NULL, hash TEXT NOT NULL)"
)
# Quorum (bot.inbox.quorum): how many distinct approvers a request needs (0: one answer settles it), who may
# answer it (JSON list; NULL: the room's answerers), the approvals so far (JSON list of {by, at, option_id})
# and their number, and how many of them its prompt shows (the outbox edits it up to them).
QUORUM_COLUMNS = (
    ("approvals_needed", "INTEGER NOT NULL DEFAULT 0"), ("approvers", "TEXT"), ("approvals", "TEXT"),
    ("approvals_count", "INTEGER NOT NULL DEFAULT 0"), ("approvals_shown", "INTEGER NOT NULL DEFAULT 0"),
    ("escalated_at", "{REAL}"), ("escalated_to", "TEXT"),  # escalation (bot.service.escalation): when, to whom
)


async def ledger_and_quorum_sqlite(db: Connection) -> None:
    await db.script(db.dialect.ddl(LEDGER_DDL))
    have = await _columns(db, "requests")  # a version set back by hand may have them already
    for column, kind in QUORUM_COLUMNS:
        if column not in have:
            await db.execute(db.dialect.ddl(f"ALTER TABLE requests ADD COLUMN {column} {kind}"))


async def post_held_sqlite(db: Connection) -> None:
    if "post_held" not in await _columns(db, "requests"):  # a version set back by hand may have it already
        await db.execute("ALTER TABLE requests ADD COLUMN post_held INTEGER NOT NULL DEFAULT 0")


SESSION_ROOMS = (
    " UPDATE seq SET room = COALESCE((SELECT q.room FROM requests q WHERE q.session_id = seq.session_id"
    " ORDER BY q.request_seq LIMIT 1), 'default');"
    " CREATE INDEX IF NOT EXISTS requests_pending_token ON requests (submitted_by) WHERE state='pending';"
    " CREATE INDEX IF NOT EXISTS requests_pending_session ON requests (session_id) WHERE state='pending'"
)


async def session_rooms_sqlite(db: Connection) -> None:
    have = await _columns(db, "seq")  # a version set back by hand may have them already
    for col, kind in (("room", "TEXT NOT NULL DEFAULT 'default'"), ("proxy_origin", "TEXT"), ("proxy_token", "TEXT")):
        if col not in have:
            await db.execute(f"ALTER TABLE seq ADD COLUMN {col} {kind}")
    await db.script(SESSION_ROOMS)


async def questions_and_plans_sqlite(db: Connection) -> None:
    have = await _columns(db, "requests")  # a version set back by hand may have them already
    if "kind" not in have:
        await db.execute("ALTER TABLE requests ADD COLUMN kind TEXT NOT NULL DEFAULT 'permission'")
    if "outcome_answers" not in have:
        await db.execute("ALTER TABLE requests ADD COLUMN outcome_answers TEXT")


HOOK_HOLDERS = (
    "UPDATE requests SET held_by='' WHERE state='pending' AND key LIKE 'hook-%' AND held_by IS NULL;"
    " CREATE INDEX IF NOT EXISTS requests_held ON requests (held_by) WHERE held_by IS NOT NULL AND state='pending';"
    " CREATE TABLE IF NOT EXISTS daemon_leases (holder TEXT PRIMARY KEY, heartbeat {REAL} NOT NULL)"
)


async def hook_holders_sqlite(db: Connection) -> None:
    if "held_by" not in await _columns(db, "requests"):  # a version set back by hand may have it already
        await db.execute("ALTER TABLE requests ADD COLUMN held_by TEXT")
    await db.script(db.dialect.ddl(HOOK_HOLDERS))
