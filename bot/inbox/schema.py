"""The inbox's schema: versioned steps for SQLite and PostgreSQL (:class:`bot.inbox.db.UpgradeTable`).

One small step per version, each run in its own transaction, in order (as mautrix-python's
``async_db/upgrade.py`` and maubot's ``db/upgrade/`` do), the same version numbers on both engines. The
version is kept in ``schema_versions`` (on SQLite also in ``PRAGMA user_version``, as before, so an older
permission-bot still refuses a newer folder). A database newer than this code is refused with one clear
line. A SQLite folder made before ``schema_versions`` goes on from its ``user_version``; one made before
versions existed (``user_version`` 0 with a ``requests`` table) is taken as version 1.

To change the schema: append a step to ``STEPS``; never edit a step that shipped. A step that adds columns
(:func:`added`) adds each on SQLite only when it is missing: a folder whose version was set back by hand (or by
an older release, or made before versions existed) may have it already.
"""

from __future__ import annotations

from bot.inbox.db import Connection, Database, Step, UpgradeTable, both
from bot.inbox.db.upgrade import Body, run
from bot.inbox.posting import UNPOSTED, UNSEEDED
from bot.inbox.requests import PENDING_LIVE
from bot.inbox.sessions import HOOK_KEY_PREFIX

V1_DDL = """
CREATE TABLE IF NOT EXISTS requests ({ROWID}
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
  requested_at {REAL} NOT NULL,
  expires_at {REAL} NOT NULL,
  prompt_event_id TEXT,
  prompt_edited INTEGER NOT NULL DEFAULT 0,
  seeded INTEGER NOT NULL DEFAULT 0,
  outcome_option_id TEXT,
  outcome_by TEXT,
  outcome_via TEXT,
  outcome_feedback TEXT,
  decided_at {REAL},
  UNIQUE (session_id, request_seq)
);
CREATE UNIQUE INDEX IF NOT EXISTS requests_key ON requests (session_id, key) WHERE key IS NOT NULL;
CREATE INDEX IF NOT EXISTS requests_state ON requests (state, requested_at);
CREATE INDEX IF NOT EXISTS requests_prompt ON requests (prompt_event_id);
CREATE INDEX IF NOT EXISTS requests_toolcall ON requests (session_id, tool_call_id);
CREATE TABLE IF NOT EXISTS seq (session_id TEXT PRIMARY KEY, last INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS handled (event_id TEXT PRIMARY KEY, at {REAL} NOT NULL);
CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS reactions ({ROWID}
  request_id TEXT NOT NULL, key TEXT NOT NULL, event_id TEXT, redacted INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (request_id, key)
);
"""
"""The first release's tables as a DDL template (``{REAL}``, ``{ROWID}``: :meth:`bot.inbox.db.dialect.Dialect.ddl`)."""
ROOM = ("room", "TEXT NOT NULL DEFAULT 'default'")
PENDING_HOOK = f"state='pending' AND substr(key, 1, {len(HOOK_KEY_PREFIX)})='{HOOK_KEY_PREFIX}'"
"""The WHERE of the requests_pending_hook index (step: backlog indexes): the hooks' pending requests."""


def added(description: str, columns: dict[str, tuple[tuple[str, str], ...]], then: str = "") -> Step:
    """A step adding ``columns`` (table -> (column, DDL type template) pairs), then running the script ``then``."""

    async def sqlite(db: Connection) -> None:
        for table, cols in columns.items():
            have = {str(r[1]) for r in await db.fetch(f"PRAGMA table_info({table})")}
            for column, kind in cols:
                if column not in have:
                    await db.execute(db.dialect.ddl(f"ALTER TABLE {table} ADD COLUMN {column} {kind}"))
        await db.script(db.dialect.ddl(then))

    alters = [f"ALTER TABLE {t} ADD COLUMN IF NOT EXISTS {c} {k}" for t, cols in columns.items() for c, k in cols]
    return Step(description, sqlite, "; ".join([*alters, then]))


STEPS: list[Step] = [
    both("first release", V1_DDL),
    added(
        "posted_at and parking",
        {"requests": (("posted_at", "{REAL}"),)},
        "CREATE TABLE IF NOT EXISTS parked ({ROWID} event_id TEXT PRIMARY KEY, source TEXT NOT NULL,"
        " at {REAL} NOT NULL)",
    ),
    # A watched harness's request (its id + a fingerprint of the record) -> the inbox request it became,
    # and whether the answer reached the harness (NULL: not yet; sending, delivered, elsewhere, refused, withdrawn).
    both(
        "harness links",
        "CREATE TABLE IF NOT EXISTS harness_links (harness TEXT NOT NULL, harness_id TEXT NOT NULL,"
        " fingerprint TEXT NOT NULL, request_id TEXT NOT NULL UNIQUE, delivery TEXT,"
        " attempts INTEGER NOT NULL DEFAULT 0, at {REAL}, PRIMARY KEY (harness, harness_id, fingerprint));"
        " CREATE INDEX IF NOT EXISTS harness_links_open ON harness_links (harness)"
        " WHERE delivery IS NULL OR delivery='sending'",
    ),
    both("cwd", "ALTER TABLE requests ADD COLUMN cwd TEXT"),  # the asking session's working directory
    # Positions in the station room's timeline (bot.answers.timeline): plain answers bind by them. The settled
    # edit's event id: the bot's own events it cannot decrypt (a new device) still find their mark.
    both(
        "timeline",
        "CREATE TABLE IF NOT EXISTS timeline (pos {SERIAL_PK},"
        " event_id TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, request_id TEXT);"
        " CREATE INDEX IF NOT EXISTS timeline_request ON timeline (request_id, kind);"
        " CREATE INDEX IF NOT EXISTS timeline_kind ON timeline (kind, pos);"
        " ALTER TABLE requests ADD COLUMN edit_event_id TEXT;"
        " CREATE INDEX IF NOT EXISTS requests_edit ON requests (edit_event_id)",
    ),
    # the name of the API token that submitted the request: an agent token cancels only its own
    both("submitted_by", "ALTER TABLE requests ADD COLUMN submitted_by TEXT"),
    # "Allow for this session" rules (bot.inbox.session_rules): exact scopes, ended with their session or when idle.
    both(
        "session rules",
        "CREATE TABLE IF NOT EXISTS session_rules (id {SERIAL_PK},"
        " origin TEXT NOT NULL, session_id TEXT NOT NULL, tool TEXT NOT NULL, subject TEXT NOT NULL,"
        " set_by TEXT NOT NULL, request_id TEXT NOT NULL, created_at {REAL} NOT NULL, used_at {REAL} NOT NULL,"
        " UNIQUE (origin, session_id, tool, subject));"
        " CREATE INDEX IF NOT EXISTS session_rules_used ON session_rules (used_at)",
    ),
    # A rule-settled request never to be posted (prompts.post_rule_settled off) was marked by an empty
    # prompt_event_id, a second sentinel beside NULL; now its own flag, and prompt_event_id is NULL or an id.
    both(
        "post_skipped",
        "ALTER TABLE requests ADD COLUMN post_skipped INTEGER NOT NULL DEFAULT 0;"
        " UPDATE requests SET post_skipped=1, prompt_event_id=NULL WHERE prompt_event_id=''",
    ),
    # The settled prompts whose edit is not sent yet (Inbox.needing_edit), found without reading every
    # request: the outbox asks after each settlement, and a full scan costs ~30 ms at 10,000 requests.
    both(
        "unedited index",
        "CREATE INDEX IF NOT EXISTS requests_unedited ON requests (decided_at)"
        " WHERE prompt_edited=0 AND decided_at IS NOT NULL AND prompt_event_id IS NOT NULL",
    ),
    # Many station rooms ([[rooms]]): each request belongs to one, and each room has its own timeline
    # (plain answers bind within their room). Everything before belongs to the default room.
    added("rooms", {"requests": (ROOM,), "timeline": (ROOM,)},
          "CREATE INDEX IF NOT EXISTS timeline_room ON timeline (room, kind, pos)"),
    # A new request held back from posting while its rules are applied (Inbox.hold_post), kept in the
    # database: on a shared PostgreSQL database the leader posts what a standby's API took.
    added("post_held", {"requests": (("post_held", "INTEGER NOT NULL DEFAULT 0"),)}),
    # Rooms are a boundary: a session belongs to one room, the room of its first request (seq.room;
    # another room's submission under its id is refused); the ACP proxy run that claimed it (seq.proxy_origin,
    # seq.proxy_token: only its requests may replace a held hook's); pending counts per agent token and per
    # session (the caps on floods) read from partial indexes of the pending requests.
    added(
        "session rooms, proxy claims, pending caps",
        {"seq": (ROOM, ("proxy_origin", "TEXT"), ("proxy_token", "TEXT"))},
        "UPDATE seq SET room = COALESCE((SELECT q.room FROM requests q WHERE q.session_id = seq.session_id"
        " ORDER BY q.request_seq LIMIT 1), 'default');"
        " CREATE INDEX IF NOT EXISTS requests_pending_token ON requests (submitted_by) WHERE state='pending';"
        " CREATE INDEX IF NOT EXISTS requests_pending_session ON requests (session_id) WHERE state='pending'",
    ),
    # Approvals an organisation relies on. The ledger (bot.inbox.ledger): one hash-chained entry
    # per settlement, appended in the settlement's transaction; ledger_head is its one-row head, the row every
    # append takes its turn on. And the quorum columns of a request (bot.inbox.quorum): how many distinct
    # approvers it needs (0: one answer settles it), who may answer it (JSON list; NULL: the room's answerers),
    # the approvals so far (JSON list of {by, at, option_id}) and their number, how many of them its prompt
    # shows (the outbox edits it up to them); escalation (bot.service.escalation): when, to whom.
    added(
        "ledger and quorum",
        {"requests": (
            ("approvals_needed", "INTEGER NOT NULL DEFAULT 0"), ("approvers", "TEXT"), ("approvals", "TEXT"),
            ("approvals_count", "INTEGER NOT NULL DEFAULT 0"), ("approvals_shown", "INTEGER NOT NULL DEFAULT 0"),
            ("escalated_at", "{REAL}"), ("escalated_to", "TEXT"),
        )},
        "CREATE TABLE IF NOT EXISTS ledger (seq INTEGER PRIMARY KEY, at {REAL} NOT NULL, room TEXT NOT NULL,"
        " request_id TEXT NOT NULL, hash TEXT NOT NULL, entry TEXT NOT NULL);"
        " CREATE INDEX IF NOT EXISTS ledger_at ON ledger (at);"
        " CREATE TABLE IF NOT EXISTS ledger_head (id INTEGER PRIMARY KEY, seq INTEGER NOT NULL, hash TEXT NOT NULL)",
    ),
    # Questions and plans: what a request asks (permission, question, plan), and a question's answers
    # (its text -> the answer as given, and the option ids picked) stored with the outcome.
    added("questions and plans",
          {"requests": (("kind", "TEXT NOT NULL DEFAULT 'permission'"), ("outcome_answers", "TEXT"))}),
    # Hook holders: the daemon holding a hook's request live (requests.held_by, its holder
    # id; '' for one held before this step, whose holder is unknown) and each daemon's lease (database clock),
    # so a daemon withdraws only what a gone daemon held (bot.service.hook_leases), found by an index.
    added(
        "hook holders",
        {"requests": (("held_by", "TEXT"),)},
        "UPDATE requests SET held_by='' WHERE state='pending' AND key LIKE 'hook-%' AND held_by IS NULL;"
        " CREATE INDEX IF NOT EXISTS requests_held ON requests (held_by) WHERE held_by IS NOT NULL AND state='pending';"
        " CREATE TABLE IF NOT EXISTS daemon_leases (holder TEXT PRIMARY KEY, heartbeat {REAL} NOT NULL)",
    ),
    # Backlog: the prompts not posted yet, from either end (Inbox.needing_post: new arrivals are
    # never behind a backlog), the pending hook requests (hook- keys), the next
    # expiry (the timer, woken by every submission) and the prompts still to seed with keycaps (after every
    # post), each found without reading every pending request. The queries repeat these WHEREs (partial indexes).
    Step("backlog indexes", *(  # keyed by (requested_at) on SQLite (its rowid implied), (requested_at, rowid) on PG
        f"CREATE INDEX IF NOT EXISTS requests_unposted ON requests ({key}) WHERE {UNPOSTED};"
        f" CREATE INDEX IF NOT EXISTS requests_pending_hook ON requests ({key}) WHERE {PENDING_HOOK};"
        f" CREATE INDEX IF NOT EXISTS requests_expiry ON requests (expires_at) WHERE {PENDING_LIVE};"
        f" CREATE INDEX IF NOT EXISTS requests_unseeded ON requests ({key}) WHERE {UNSEEDED}"
        for key in ("requested_at", "requested_at, rowid")
    )),
    # A listing's pages on PostgreSQL (`permissions ls`): the keyset (requested_at, rowid) in one index,
    # as SQLite's requests_state already is (its rowid implied), so a page is read in order and stops at its end;
    # it serves all that requests_state did, which goes. Nothing to do on SQLite.
    Step(
        "listing key",
        "SELECT 1",
        "CREATE INDEX IF NOT EXISTS requests_state_key ON requests (state, requested_at, rowid);"
        " DROP INDEX IF EXISTS requests_state",
    ),
]
LATEST = len(STEPS)


async def legacy_version(conn: Connection) -> int:
    """A SQLite folder from before ``schema_versions``: its ``user_version``, or 1 for the unversioned first
    release (a ``requests`` table); a PostgreSQL database has no such past."""
    if conn.dialect.is_postgres:
        return 0
    v = int(await conn.fetchval("PRAGMA user_version") or 0)
    if v == 0 and await conn.fetchrow("SELECT 1 FROM sqlite_master WHERE type='table' AND name='requests'"):
        v = 1  # made before versions existed: the first release's tables are there
    return v


def _mirrored(n: int, body: Body) -> Body:
    """A SQLite step body that also sets ``PRAGMA user_version`` to ``n`` (in the step's transaction)."""

    async def mirrored(conn: Connection) -> None:
        await run(body, conn)
        await conn.execute(f"PRAGMA user_version = {n}")

    return mirrored


def table() -> UpgradeTable:
    """The inbox's :class:`UpgradeTable` (``STEPS`` up to ``LATEST``; tests may shorten or lengthen both)."""
    mirrored = [Step(s.description, _mirrored(i + 1, s.sqlite), s.postgresql) for i, s in enumerate(STEPS[:LATEST])]
    return UpgradeTable("inbox", mirrored, legacy=legacy_version)


async def upgrade(db: Database, where: str = "inbox") -> int:
    """Bring ``db`` up to ``LATEST``, one transaction per step; the version reached."""
    return await table().upgrade(db, where)
