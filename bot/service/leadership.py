"""Leader or standby: which daemon on a shared PostgreSQL database runs the Matrix side.

Every daemon serves the whole HTTP API. Only the leader runs the Matrix side (sync, posts, edits,
timers, harness watchers): :meth:`Leadership.elect` waits until this daemon leads (a standby waits
there) and sets its :class:`bot.inbox.db.fence.Fence` in the caller's context, so the Matrix-side
tasks created afterwards carry the term into every write transaction and before every send.
:meth:`Leadership.while_leading` runs the Matrix side beside the heartbeat and raises
:class:`Deposed` the moment the term is found over (a failed beat, or a fenced write or send that saw
a newer term): the supervisor then ends the Matrix side at once, :meth:`Leadership.demote` makes this
daemon a standby again, :func:`discard` closes the old term's Matrix side (nio client, crypto store handle)
and the daemon builds its Matrix side anew (bot.service.daemon): nothing of the
old term's Matrix state (nio client, sync position, outbox queues) is reused, and a later election
starts a fresh term from the database's state. The HTTP API serves throughout. On SQLite the daemon is always the leader
and nothing is checked. A database lost for a while deposes no one by itself: the leader's
beat waits and reclaims its term when it is back (:meth:`bot.inbox.db.leader.Leader.beat`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Iterable
from functools import partial
from typing import Any

import structlog

from bot.inbox.db import Database
from bot.inbox.db.errors import DATABASE_ERRORS
from bot.inbox.db.fence import FENCE, Deposed, Fence, confirm
from bot.inbox.db.leader import LEADERSHIP, Leader
from bot.inbox.db.postgres import PostgresDatabase
from bot.matrix.client import Matrix
from bot.matrix.sender import Sender
from bot.util.aio import sleep_unless_stopped
from bot.util.backoff import Backoff
from bot.util.outage import Outage

log = structlog.get_logger("leader")

STALE_AFTER = 5.0  # a leader's heartbeat older than this (seconds) is taken over
POLL = 1.0  # a standby's wait for the lock, and the leader's beat


class Leadership:
    """This daemon's role (``leader`` or ``standby``) and, while it leads, its fence."""

    def __init__(self, db: Database, senders: Iterable[Sender]) -> None:
        self.fence: Fence | None = None
        self.leader: Leader | None = None
        if db.dialect.is_postgres:
            assert isinstance(db, PostgresDatabase)
            self.leader = Leader(db, stale_after=STALE_AFTER, poll=POLL)
        self.guard(senders)

    @property
    def role(self) -> str:
        leading = self.leader is None or (self.fence is not None and not self.fence.lost.is_set())
        return "leader" if leading else "standby"

    async def elect(self) -> None:
        """Wait until this daemon leads (at once on SQLite); the term is fenced from here on in this context."""
        if self.leader is None:
            return
        pace = Backoff(0.2, 2.0)
        outage = Outage(log, "leadership_table_retry", "leadership_table_back")
        while True:  # once, whichever daemon comes first; the database away for now: not now, retry
            try:
                await LEADERSHIP.upgrade(self.leader.db)
                outage.ok()
                break
            except DATABASE_ERRORS as e:
                self.leader.db.note_unreachable(e)
                delay = pace.delay()
                outage.failed(e, delay)
                await asyncio.sleep(delay)
        self.fence = Fence(await self.leader.campaign())
        FENCE.set(self.fence)

    async def while_leading(self, body: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """``body`` (the Matrix side) beside the heartbeat: its result, or Deposed the moment the term ends."""
        if self.leader is None or self.fence is None:
            await body()
            return
        main = asyncio.create_task(body(), name="leading")
        beat = asyncio.create_task(self._beat(self.fence), name="heartbeat")
        try:
            await asyncio.wait([main, beat], return_when=asyncio.FIRST_COMPLETED)
        finally:
            main.cancel()  # nothing when it is done already
            beat.cancel()
            await asyncio.gather(main, beat, return_exceptions=True)
        if self.fence.lost.is_set():
            raise Deposed(f"term {self.fence.term} is over")
        main.result()

    async def _beat(self, fence: Fence) -> None:
        assert self.leader is not None
        try:
            while not fence.lost.is_set():
                await self.leader.beat()
                await sleep_unless_stopped(fence.lost, POLL)
        except Deposed as e:
            fence.depose(str(e))
        log.error("leader_deposed", term=fence.term, action="stopping the Matrix side at once")

    def guard(self, senders: Iterable[Sender]) -> None:
        """Every send of ``senders`` first confirms this context's term (none on SQLite)."""
        if self.leader is not None:
            for sender in senders:  # every station room's: a send from a deposed term never leaves
                sender.guard = partial(confirm, self.leader.db)

    def demote(self) -> None:
        """The term is over: a standby again (its leadership connection dropped), until :meth:`elect`."""
        self.fence = None
        if self.leader is not None:
            self.leader.stand_down()

    async def resign(self) -> None:
        """Stopping: hand the leadership over at once (a standby need not wait for a stale beat)."""
        if self.leader is not None and self.fence is not None and not self.fence.lost.is_set():
            await self.leader.resign()


async def discard(matrix: Matrix) -> None:
    """Close an old term's Matrix side: its HTTP session (nothing in flight survives) and nio's store."""
    try:
        await matrix.close()
    except Exception as e:  # the old side is dropped either way; the new one opens its own
        log.warning("matrix_close_failed", error=f"{type(e).__name__}: {e}"[:300])
    store: Any = getattr(matrix.client, "store", None)
    if store is not None:
        with contextlib.suppress(Exception):
            store.database.close()
