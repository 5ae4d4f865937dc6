"""The inbox's schema, versioned with ``PRAGMA user_version``.

One small step per version, each run in its own transaction, in order (as
mautrix-python's ``async_db/upgrade.py`` and maubot's ``db/upgrade/`` do). A
database that is newer than this code is refused with one clear line. A state
folder made before versions existed (``user_version`` 0 with a ``requests``
table) is taken as version 1 and brought up from there.

To change the schema: append a step to ``STEPS``; never edit a step that shipped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import aiosqlite

Step = Callable[[aiosqlite.Connection], Awaitable[None]]


class SchemaTooNew(Exception):
    """The database was written by a newer permission-bot."""


V1 = """
CREATE TABLE IF NOT EXISTS requests (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  request_seq INTEGER NOT NULL,
  key TEXT,
  label TEXT,
  tool_call_id TEXT NOT NULL,
  title TEXT NOT NULL,
  tool_kind TEXT,
  tool_name TEXT,
  options TEXT NOT NULL,
  raw_input TEXT,
  locations TEXT NOT NULL,
  content TEXT NOT NULL,
  params TEXT NOT NULL,
  digest TEXT NOT NULL,
  revision INTEGER NOT NULL,
  state TEXT NOT NULL,
  requested_at REAL NOT NULL,
  expires_at REAL NOT NULL,
  prompt_event_id TEXT,
  prompt_edited INTEGER NOT NULL DEFAULT 0,
  seeded INTEGER NOT NULL DEFAULT 0,
  outcome_option_id TEXT,
  outcome_by TEXT,
  outcome_via TEXT,
  outcome_feedback TEXT,
  decided_at REAL,
  UNIQUE (session_id, request_seq)
);
CREATE UNIQUE INDEX IF NOT EXISTS requests_key ON requests (session_id, key) WHERE key IS NOT NULL;
CREATE INDEX IF NOT EXISTS requests_state ON requests (state, requested_at);
CREATE INDEX IF NOT EXISTS requests_prompt ON requests (prompt_event_id);
CREATE INDEX IF NOT EXISTS requests_toolcall ON requests (session_id, tool_call_id);
CREATE TABLE IF NOT EXISTS seq (session_id TEXT PRIMARY KEY, last INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS handled (event_id TEXT PRIMARY KEY, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS reactions (
  request_id TEXT NOT NULL, key TEXT NOT NULL, event_id TEXT, redacted INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (request_id, key)
);
"""


async def _columns(db: aiosqlite.Connection, table: str) -> set[str]:
    cur = await db.execute(f"PRAGMA table_info({table})")
    return {str(r[1]) for r in await cur.fetchall()}


async def _v1_first_release(db: aiosqlite.Connection) -> None:
    for stmt in V1.split(";"):
        if stmt.strip():
            await db.execute(stmt)


async def _v2_posted_at_and_parking(db: aiosqlite.Connection) -> None:
    # Unversioned folders may already have these (they were added in place before versions existed).
    if "posted_at" not in await _columns(db, "requests"):
        await db.execute("ALTER TABLE requests ADD COLUMN posted_at REAL")
    await db.execute(
        "CREATE TABLE IF NOT EXISTS parked (event_id TEXT PRIMARY KEY, source TEXT NOT NULL, at REAL NOT NULL)"
    )


async def _v3_harness_links(db: aiosqlite.Connection) -> None:
    # A watched harness's request (its id + a fingerprint of the record) -> the inbox request it became,
    # and whether the answer reached the harness (NULL: not yet; sending, delivered, elsewhere, refused, withdrawn).
    await db.execute(
        "CREATE TABLE IF NOT EXISTS harness_links (harness TEXT NOT NULL, harness_id TEXT NOT NULL,"
        " fingerprint TEXT NOT NULL, request_id TEXT NOT NULL UNIQUE, delivery TEXT,"
        " attempts INTEGER NOT NULL DEFAULT 0, at REAL, PRIMARY KEY (harness, harness_id, fingerprint))"
    )
    await db.execute(
        "CREATE INDEX IF NOT EXISTS harness_links_open ON harness_links (harness)"
        " WHERE delivery IS NULL OR delivery='sending'"
    )


async def _v4_cwd(db: aiosqlite.Connection) -> None:
    await db.execute("ALTER TABLE requests ADD COLUMN cwd TEXT")  # the asking session's working directory


async def _v5_timeline(db: aiosqlite.Connection) -> None:
    # Positions in the station room's timeline (bot.answers.timeline): plain answers bind by them.
    await db.execute(
        "CREATE TABLE IF NOT EXISTS timeline (pos INTEGER PRIMARY KEY AUTOINCREMENT,"
        " event_id TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, request_id TEXT)"
    )
    await db.execute("CREATE INDEX IF NOT EXISTS timeline_request ON timeline (request_id, kind)")
    await db.execute("CREATE INDEX IF NOT EXISTS timeline_kind ON timeline (kind, pos)")
    # The settled edit's event id: the bot's own events it cannot decrypt (a new device) still find their mark.
    await db.execute("ALTER TABLE requests ADD COLUMN edit_event_id TEXT")
    await db.execute("CREATE INDEX IF NOT EXISTS requests_edit ON requests (edit_event_id)")


async def _v6_submitted_by(db: aiosqlite.Connection) -> None:
    # the name of the API token that submitted the request: an agent token cancels only its own
    await db.execute("ALTER TABLE requests ADD COLUMN submitted_by TEXT")


async def _v7_session_rules(db: aiosqlite.Connection) -> None:
    # "Allow for this session" rules (bot.inbox.session_rules): exact scopes, ended with their session or when idle.
    await db.execute(
        "CREATE TABLE IF NOT EXISTS session_rules (id INTEGER PRIMARY KEY AUTOINCREMENT,"
        " origin TEXT NOT NULL, session_id TEXT NOT NULL, tool TEXT NOT NULL, subject TEXT NOT NULL,"
        " set_by TEXT NOT NULL, request_id TEXT NOT NULL, created_at REAL NOT NULL, used_at REAL NOT NULL,"
        " UNIQUE (origin, session_id, tool, subject))"
    )
    await db.execute("CREATE INDEX IF NOT EXISTS session_rules_used ON session_rules (used_at)")


async def _v8_post_skipped(db: aiosqlite.Connection) -> None:
    # A rule-settled request never to be posted (prompts.post_rule_settled off) was marked by an empty
    # prompt_event_id, a second sentinel beside NULL; now its own flag, and prompt_event_id is NULL or an id.
    await db.execute("ALTER TABLE requests ADD COLUMN post_skipped INTEGER NOT NULL DEFAULT 0")
    await db.execute("UPDATE requests SET post_skipped=1, prompt_event_id=NULL WHERE prompt_event_id=''")


async def _v9_unedited_index(db: aiosqlite.Connection) -> None:
    # The settled prompts whose edit is not sent yet (Inbox.needing_edit), found without reading every
    # request: the outbox asks after each settlement, and a full scan costs ~30 ms at 10,000 requests.
    await db.execute(
        "CREATE INDEX IF NOT EXISTS requests_unedited ON requests (decided_at)"
        " WHERE prompt_edited=0 AND decided_at IS NOT NULL AND prompt_event_id IS NOT NULL"
    )


async def _v10_rooms(db: aiosqlite.Connection) -> None:
    # Many station rooms ([[rooms]]): each request belongs to one, and each room has its own timeline
    # (plain answers bind within their room). Everything before belongs to the default room.
    for table in ("requests", "timeline"):
        if "room" not in await _columns(db, table):
            await db.execute(f"ALTER TABLE {table} ADD COLUMN room TEXT NOT NULL DEFAULT 'default'")
    await db.execute("CREATE INDEX IF NOT EXISTS timeline_room ON timeline (room, kind, pos)")


STEPS: list[Step] = [
    _v1_first_release,
    _v2_posted_at_and_parking,
    _v3_harness_links,
    _v4_cwd,
    _v5_timeline,
    _v6_submitted_by,
    _v7_session_rules,
    _v8_post_skipped,
    _v9_unedited_index,
    _v10_rooms,
]
LATEST = len(STEPS)


async def version(db: aiosqlite.Connection) -> int:
    cur = await db.execute("PRAGMA user_version")
    row = await cur.fetchone()
    v = int(row[0]) if row else 0
    if v == 0:
        cur = await db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='requests'")
        if await cur.fetchone() is not None:
            v = 1  # made before versions existed: the first release's tables are there
    return v


async def upgrade(db: aiosqlite.Connection, path: str = "inbox") -> int:
    """Bring ``db`` (autocommit mode) up to ``LATEST``, one transaction per step; the version reached."""
    current = await version(db)
    if current > LATEST:
        raise SchemaTooNew(
            f"{path} has schema version {current}, newer than this permission-bot knows ({LATEST}); "
            "upgrade permission-bot or restore a backup of the state folder"
        )
    for n in range(current, LATEST):
        await db.execute("BEGIN IMMEDIATE")
        try:
            await STEPS[n](db)
            await db.execute(f"PRAGMA user_version = {n + 1}")
        except BaseException:
            await db.execute("ROLLBACK")
            raise
        await db.execute("COMMIT")
    return LATEST
