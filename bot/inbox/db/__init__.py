"""One database interface over SQLite and PostgreSQL (issue 27): shared SQL, versioned steps per engine,
PostgreSQL leadership with a fencing term, and LISTEN/NOTIFY of ids.

``create(url)`` gives a not-yet-started :class:`Database` for ``state.database``'s value.
"""

from __future__ import annotations

from bot.inbox.db.base import Connection, Database, DatabaseError, Row, placeholders
from bot.inbox.db.dialect import POSTGRES, SQLITE, Dialect, DialectError
from bot.inbox.db.upgrade import SchemaTooNew, Step, UpgradeTable, both
from bot.inbox.db.url import KEY, DatabaseUrlError, Target, mask, parse


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
    "Dialect",
    "DialectError",
    "Row",
    "SchemaTooNew",
    "Step",
    "Target",
    "UpgradeTable",
    "both",
    "create",
    "mask",
    "parse",
    "placeholders",
]
