"""The durable registry and the only owner of state, over one database interface (``db/``: SQLite WAL
through the standard library's ``sqlite3``, each call made inline on the loop's thread, or PostgreSQL through
asyncpg; shared SQL with ``$n`` placeholders). One transaction per change; settling is a conditional UPDATE,
so a request leaves ``pending`` once. Everything else asks it.

Parts: ``store`` (the ``Inbox`` front class: its database, listeners) over its parts, one
job each: ``base`` (transactions, committed reads, row -> Record), ``requests`` (submit, get, settle
once, wait, due), ``listing`` (pending, pages, API JSON), ``posting`` (prompt event or post_skipped,
settled edit, seeded reactions), ``marks`` (room timeline positions and marks, and their types),
``handled`` (handled and parked event ids; key/value: sync token, Matrix session, install id),
``links`` (watched harness id -> request id, delivery state); ``schema`` (the versioned schema
steps); ``record`` (the Record, a Settlement), ``submission`` (a body -> a Submission, checked), ``digest`` (the
request digest a decision and a key are bound to), ``decisions`` (picks options), ``pages`` (the keyset cursor
of GET /permissions pages); ``session_rules`` ("Allow for this session", ``s`` / 🔁: the exact scope
a rule covers, pure) beside its store ``session_rule_store`` (add, match, list, revoke, end,
expire); ``migrate`` (a SQLite inbox copied into an empty PostgreSQL
database: ``state migrate``); ``rules/`` (allow/deny rules: ``permissions watch`` and the config's ``[[rules]]``: model,
parse, flags); ``db/`` (one database interface over SQLite and PostgreSQL, versioned upgrades,
leadership with a fencing term, LISTEN/NOTIFY of ids: the ground for high availability).

Also: ``other_daemons`` (changes across daemons on one PostgreSQL database), ``approvals`` (the inbox part for
approvals), ``holds`` (the inbox part for hook holders), ``ledger`` (the ledger's storage), ``quorum`` (who counts
toward a quorum's approvals: distinct people), ``sessions`` (sessions (table ``seq``)).
"""
