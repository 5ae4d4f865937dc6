"""The inbox's SQLite connections: aiosqlite's API, each call run on the event loop's own thread.

aiosqlite runs every call (a statement, a fetch, a commit) in a worker thread of its
connection: two thread hops and a hand-over of the GIL each, 0.1-0.5 ms on a busy machine,
and settling an answer took about ten of them. The inbox's statements are small, and with
WAL and ``synchronous=NORMAL`` a commit writes the log without an fsync (only a checkpoint,
once per ~4 MB of log, syncs), so a call costs tens of microseconds done where it is asked.
Measured by ``bench/latency.py``: an answer seen -> its request settled 1.4 -> 0.3 ms at the
median, 4.7 -> 0.4 ms at p90. The price: a stalled disk now holds up the whole loop (the API, the sync)
rather than only the inbox's callers, who are most of it anyway; a failing one still raises at once
(sqlite3.Error, handled as before). The connection is still opened (and finally stopped) by aiosqlite's
thread; only ``Connection._execute``, the one method every call goes through, is replaced
(``tests/test_inbox_connection.py`` fails loudly if aiosqlite changes that).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

T = TypeVar("T")


class InlineConnection(aiosqlite.Connection):
    """An ``aiosqlite.Connection`` whose calls run at once, on the caller's thread."""

    async def _execute(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if not self._running or self._connection is None:
            raise ValueError("Connection closed")
        return fn(*args, **kwargs)


async def connect(database: str | Path, **kwargs: Any) -> aiosqlite.Connection:
    """``aiosqlite.connect(database, **kwargs)``, its calls then made inline (see the module docstring)."""
    where = str(database)

    def connector() -> sqlite3.Connection:
        c: sqlite3.Connection = sqlite3.connect(where, check_same_thread=False, **kwargs)  # in aiosqlite's thread
        return c

    conn: aiosqlite.Connection = await InlineConnection(connector, 64)
    return conn
