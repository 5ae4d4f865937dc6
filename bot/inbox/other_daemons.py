"""Changes across daemons on one PostgreSQL database: a change another daemon committed reaches this one.

Each inbox transaction that submits, settles or amends a request NOTIFYs ``kind<TAB>holder<TAB>id`` on
:data:`bot.inbox.base.CHANGED` (heard only once it commits). :class:`Across` LISTENs, skips its own
daemon's, reads the record and hands it to :meth:`bot.inbox.store.Inbox.heard`: long-polls waiting here
answer, and the listeners that follow every daemon (the leader's outbox, every daemon's ``/events``) are
told. After its connection was lost it re-reads every request waited on here (a NOTIFY may have been
missed). On SQLite there is one daemon per file: nothing to do.
"""

from __future__ import annotations

import asyncio

import structlog

from bot.inbox.base import CHANGED
from bot.inbox.db.notify import Listener
from bot.inbox.db.postgres import PostgresDatabase
from bot.inbox.store import Inbox

log = structlog.get_logger("inbox")


class Across:
    """The LISTEN side of one daemon's inbox (see the module docstring)."""

    def __init__(self, inbox: Inbox) -> None:
        self.inbox = inbox
        pg = inbox.database if isinstance(inbox.database, PostgresDatabase) else None
        self.listener = Listener(pg, CHANGED, self._on_id, self._on_gap) if pg is not None else None
        self.holder = pg.holder if pg is not None else ""
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        if self.listener is not None:
            await self.listener.start()

    async def stop(self) -> None:
        if self.listener is not None:
            await self.listener.stop()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _spawn(self, kind: str, request_id: str) -> None:
        task = asyncio.get_running_loop().create_task(self._tell(kind, request_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _on_id(self, payload: str) -> None:
        kind, _, rest = payload.partition("\t")
        holder, _, request_id = rest.partition("\t")
        if holder != self.holder and request_id:  # our own changes were told when they committed
            self._spawn(kind, request_id)

    def _on_gap(self) -> None:
        for request_id in self.inbox.waited():
            self._spawn("resolved", request_id)

    async def _tell(self, kind: str, request_id: str) -> None:
        try:
            rec = await self.inbox.get(request_id)
        except Exception as e:  # the database is away: the long-poll answers at its deadline, re-read then
            log.warning("inbox_change_unread", request_id=request_id, error=f"{type(e).__name__}: {e}")
            return
        if rec is not None:
            self.inbox.heard(kind, rec)
