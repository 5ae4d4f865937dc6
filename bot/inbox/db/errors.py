"""The errors that mean "the state cannot be read or written right now", on either engine: the API answers
them with 503 (retry later), the sync loop waits and tries again. Never a programming error."""

from __future__ import annotations

import sqlite3

import asyncpg

from bot.inbox.db.base import DatabaseError

DATABASE_ERRORS: tuple[type[BaseException], ...] = (
    sqlite3.Error,
    asyncpg.PostgresError,  # includes a serialization failure, a terminated backend, a read-only standby
    asyncpg.InterfaceError,  # the connection is closed or was lost
    asyncpg.InternalClientError,  # asyncpg's word for a connection the server ended mid-call
    DatabaseError,
)
STORAGE_ERRORS = (*DATABASE_ERRORS, OSError)  # with the disk's own errors
