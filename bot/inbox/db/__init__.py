"""One database interface over SQLite and PostgreSQL: shared SQL, versioned steps per engine,
PostgreSQL leadership with a fencing term, and LISTEN/NOTIFY of ids.

``create(url)`` gives a not-yet-started :class:`Database` for ``state.database``'s value.

Also: ``base`` (the one database interface the inbox speaks, whatever the engine (mautrix-python's…), ``dialect``
(where SQLite and PostgreSQL differ, in one place), ``errors`` (the errors that mean "the state cannot be read or
written right now", on either engine), ``fence`` (the fencing term of the Matrix side's writes), ``leader``
(leadership on PostgreSQL), ``notify`` (wake-ups across daemons), ``pgurl`` (A ``postgresql://`` URL read once, by
the driver's own rules (asyncpg's…), ``postgres`` (the PostgreSQL engine, over asyncpg, with TCP keepalives on
every connection), ``sqlite`` (the SQLite engine), ``upgrade`` (versioned schema steps, per engine,
kept in one ``schema_versions`` table (mautrix's…).
"""

from __future__ import annotations

from bot.inbox.db.base import Connection, Database, DatabaseError, Row, placeholders
from bot.inbox.db.dialect import POSTGRES, SQLITE, DialectError
from bot.inbox.db.upgrade import SchemaTooNew, Step, UpgradeTable, both
from bot.inbox.db.url import KEY, DatabaseUrlError, mask, parse


def create(url: str, holder: str = "", key: str = KEY) -> Database:
    """The database ``url`` names (``sqlite:PATH``, a path, ``postgresql://...``), not started yet.
    ``holder`` names this daemon on PostgreSQL (its connections' ``application_name``); ``key`` where the
    URL came from, for messages."""
    target = parse(url, key=key)
    if target.engine == "postgresql":
        from bot.inbox.db.postgres import PostgresDatabase

        return PostgresDatabase(target, holder)
    from bot.inbox.db.sqlite import SqliteDatabase

    return SqliteDatabase(target)


__all__ = [
    "POSTGRES",
    "SQLITE",
    "Connection",
    "Database",
    "DatabaseError",
    "DatabaseUrlError",
    "DialectError",
    "Row",
    "SchemaTooNew",
    "Step",
    "UpgradeTable",
    "both",
    "create",
    "mask",
    "parse",
    "placeholders",
]
