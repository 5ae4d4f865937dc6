"""The fencing term of the Matrix side's writes: a leader deposed while it was paused can never act again.

The supervisor sets :data:`FENCE` (this daemon's :class:`Fence`: its term) in the context the Matrix-side
tasks (sync, outbox, timer, harness watchers) are created in, so they inherit it. Every write
transaction such a task opens then reads the term in ``leadership`` first (``FOR KEY SHARE`` on
PostgreSQL: a take-over waits for it to commit) and refuses to go on with :class:`Deposed` when
another daemon took over since (:func:`check`); :func:`confirm` does the same check without a
write, before each send. The API's writes carry no fence: every daemon serves the API. On SQLite no
fence is ever set (one daemon, always the leader), so the hot path costs one ContextVar read.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


class Connection(Protocol):
    """What a check needs of ``bot.inbox.db.base``'s ``Connection`` or ``Database`` (named here: base imports
    this module)."""

    dialect: Any

    async def fetchval(self, sql: str, *args: Any) -> Any: ...


class Deposed(Exception):
    """This daemon's term is over: another daemon took over (or its leadership connection is gone)."""


@dataclass
class Fence:
    """One term of leadership; ``lost`` is set as soon as a check finds it over."""

    term: int
    lost: asyncio.Event = field(default_factory=asyncio.Event)

    def depose(self, why: str) -> Deposed:
        self.lost.set()
        return Deposed(why)


FENCE: contextvars.ContextVar[Fence | None] = contextvars.ContextVar("pb_fence", default=None)


TERM_SQL = "SELECT term FROM leadership WHERE id=1"


async def check(conn: Connection) -> None:
    """The fence of this context, if any, checked in ``conn``'s transaction (``Database.transaction`` calls it)."""
    await _verify(lambda: conn.fetchval(TERM_SQL + conn.dialect.fence_lock()))


async def confirm(db: Connection) -> None:
    """Before an action outside the database (a send): Deposed unless this context's term is still current.

    One plain read (no transaction: a send cannot be held by a row lock, and the race between this
    check and the send is the same either way; the send's transaction id dedupes a repeat)."""
    await _verify(lambda: db.fetchval(TERM_SQL))


async def _verify(read_term: Callable[[], Awaitable[Any]]) -> None:
    """Deposed (and this context's fence marked lost) unless the term ``read_term`` reads is still its own."""
    fence = FENCE.get()
    if fence is None:
        return
    if fence.lost.is_set():
        raise Deposed(f"term {fence.term} is over")
    current = await read_term()
    if current != fence.term:
        raise fence.depose(f"term {fence.term} is over (now {current})")
