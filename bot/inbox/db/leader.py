"""Leadership on PostgreSQL: one daemon holds the Matrix side; a fencing term stops a deposed one acting.

- The leader holds a session advisory lock on a connection of its own. When that connection dies (the
  daemon stopped, crashed or lost the network) the server frees the lock and a standby takes it.
- A take-over raises the term in ``leadership`` (``UPDATE ... SET term = term + 1 RETURNING term``)
  after locking the row ``FOR UPDATE``. Every leader write (post, edit, settlement, sync token) calls
  :func:`bot.inbox.db.fence.check` in its own transaction, which reads the term ``FOR KEY SHARE``: a take-over
  waits for writes in flight, and a write after it sees the new term and is refused. A leader paused
  (SIGSTOP) and resumed can never act after another took over.
- The leader beats (``heartbeat``, the database's clock: no skew between hosts). A standby finding the
  lock held but the beat older than ``stale_after`` ends the holder's backend (``pg_terminate_backend``),
  which frees the lock. A take-over blocked by a paused daemon's open transaction ends that daemon's
  backends (found by ``application_name``) and tries again.
- The database lost for a while (a restart, a fail-over to a promoted standby) deposes no one by
  itself: the leader retries with back-off until it has the lock again and finds its term still current
  (:meth:`Leader.beat` then returns: it carries on), or another term (Deposed). A standby whose own
  connection was lost leaves a free lock alone for ``stale_after`` seconds from its reconnection when the
  row names another live leader, so the leader that comes back (it retries at least once a ``poll``)
  gets its term back first.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import Any

import asyncpg
import structlog

from bot.inbox.db.base import DatabaseError
from bot.inbox.db.fence import Deposed
from bot.inbox.db.postgres import CONNECT_ERRORS, PostgresDatabase, rows_changed, tag_of
from bot.inbox.db.upgrade import UpgradeTable, both
from bot.util.backoff import Backoff
from bot.util.outage import Outage

log = structlog.get_logger("leader")

LOCK = (0x70626F74, 1)  # the advisory lock's two int4 keys ("pbot", 1); pg_locks shows them as classid, objid
LEADERSHIP = UpgradeTable(
    "leadership",
    [
        both(
            "the leadership row: term, holder, its lock backend, heartbeat (epoch seconds, database clock)",
            "CREATE TABLE leadership (id INTEGER PRIMARY KEY CHECK (id = 1), term {BIGINT} NOT NULL,"
            " holder TEXT, pid INTEGER, heartbeat {REAL});"
            "INSERT INTO leadership (id, term) VALUES (1, 0)",
        )
    ],
)
NOW = "EXTRACT(EPOCH FROM clock_timestamp())::float8"
HOLDER = (
    "SELECT l.pid, s.holder, (l.pid = s.pid) AS recorded, CASE WHEN l.pid = s.pid"
    f" THEN {NOW} - s.heartbeat ELSE EXTRACT(EPOCH FROM clock_timestamp() - a.state_change)::float8 END AS age"
    " FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid CROSS JOIN leadership s"
    " WHERE s.id = 1 AND l.locktype = 'advisory' AND l.granted AND l.objsubid = 2"
    " AND l.classid = $1::bigint::oid AND l.objid = $2::bigint::oid"
    " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)
LOST = (*CONNECT_ERRORS, DatabaseError)  # connect_one's error names state.database


@dataclass(frozen=True)
class Holder:
    """The backend holding the lock, as a standby sees it: ``recorded`` when it is the leader the row
    names (``age`` is then its heartbeat's), else a take-over in progress (``age``: its time idle)."""

    pid: int
    holder: str | None
    recorded: bool
    age: float | None


def is_stale(h: Holder | None, stale_after: float) -> bool:
    """Whether the lock holder stopped beating (or a take-over stalled) for longer than ``stale_after``."""
    return h is not None and h.age is not None and h.age > stale_after


class Leader:
    """One daemon's campaign: ``campaign`` waits until it leads (the term), ``beat`` keeps it (``lost`` is set
    once deposed), ``resign`` hands over at once."""

    def __init__(self, db: PostgresDatabase, *, stale_after: float = 5.0, poll: float = 1.0) -> None:
        self.db = db
        self.stale_after = stale_after
        self.poll = poll
        self.term: int | None = None
        self.lost = asyncio.Event()
        self._conn: Any = None
        self._grace_until = 0.0  # monotonic: until then a free lock is left to the leader the row names
        self._returning = False  # the campaign lost its connection: the grace starts once it is back
        self._backoff = Backoff(0.2, max(poll, 0.2))  # a leader retries at least as often as a standby polls
        self._outage = Outage(log, "leader_connection_lost", "leader_connection_back")  # two lines an outage

    def _lost_connection(self, e: BaseException, event: str) -> float:
        """Note a lost or refused connection (the database's health says it); the pause before the next try."""
        self.db.note_unreachable(e)
        self._drop()
        delay = self._backoff.delay()
        self._outage.failed(e, delay, event=event)
        return delay

    async def _connection(self) -> Any:
        if self._conn is None or self._conn.is_closed():
            self._conn = await self.db.connect_one()
            await self._conn.execute(f"SET lock_timeout = {max(1, int(self.poll * 1000))}")  # waits end: re-check
            self.db.unreachable = None
            self._backoff.reset()
            self._outage.ok()
            if self._returning:  # counted from the database's return, not from the last failed try
                self._returning = False
                self._grace_until = time.monotonic() + self.stale_after
        return self._conn

    @staticmethod
    async def _lock(conn: Any) -> bool:
        """Whether the leadership lock is held now (it waits up to ``poll`` for it: the ``lock_timeout``)."""
        try:
            await conn.execute("SELECT pg_advisory_lock($1, $2)", *LOCK)
        except asyncpg.exceptions.LockNotAvailableError:
            return False
        return True

    def _drop(self) -> None:
        if self._conn is not None and not self._conn.is_closed():
            self._conn.terminate()
        self._conn = None

    async def campaign(self) -> int:
        """Wait until this daemon leads; the new term."""
        self.term = None
        self.lost.clear()
        said = False
        while True:
            try:
                conn = await self._connection()
                if not await self._lock(conn):
                    if not said:  # once a campaign: the operator sees which daemon waits
                        said = True
                        log.info("standby", holder=self.db.holder,
                                 message="another daemon leads: this one serves the API and takes over when it stops")
                    await self._end_if_stale(conn)
                    continue
                if await self._leave_to_returning_leader(conn):
                    await asyncio.sleep(self.poll)
                    continue
                self.term = await self._take_over(conn)
                log.info("leader_elected", term=self.term, holder=self.db.holder)
                return self.term
            except LOST as e:
                self._returning = True  # the leader may be coming back too: a grace once reconnected
                await asyncio.sleep(self._lost_connection(e, "leader_campaign_retry"))

    async def _leave_to_returning_leader(self, conn: Any) -> bool:
        """Just back from a lost connection, holding a free lock: whether to hand it back (True: unlocked)
        because the row names another leader that has not resigned (it may be reconnecting too)."""
        if time.monotonic() >= self._grace_until:
            return False
        row = await conn.fetchrow("SELECT holder, heartbeat FROM leadership WHERE id=1")
        if row is None or row["holder"] in (None, self.db.holder) or row["heartbeat"] is None:
            return False
        await conn.execute("SELECT pg_advisory_unlock($1, $2)", *LOCK)
        log.info("leader_reclaim_awaited", holder=row["holder"])
        return True

    async def _end_if_stale(self, conn: Any) -> None:
        row = await conn.fetchrow(HOLDER, *LOCK)
        h = Holder(row["pid"], row["holder"], row["recorded"], row["age"]) if row is not None else None
        if h is not None and is_stale(h, self.stale_after):
            log.warning("leader_stale_ended", pid=h.pid, holder=h.holder, recorded=h.recorded, age=round(h.age or 0, 1))
            await conn.execute("SELECT pg_terminate_backend($1)", h.pid)

    async def _take_over(self, conn: Any) -> int:
        while True:
            prev = await conn.fetchval("SELECT holder FROM leadership WHERE id=1")
            try:
                async with conn.transaction():
                    await conn.execute("SELECT term FROM leadership WHERE id=1 FOR UPDATE")  # waits for fenced writes
                    term: int = await conn.fetchval(
                        "UPDATE leadership SET term = term + 1, holder=$1, pid=pg_backend_pid(),"
                        f" heartbeat={NOW} WHERE id=1 RETURNING term",
                        self.db.holder,
                    )
                    return term
            except asyncpg.exceptions.LockNotAvailableError:
                if prev is None or prev == self.db.holder:
                    continue
                ended = await conn.fetchval(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname=current_database()"
                    " AND pid <> pg_backend_pid() AND application_name=$1",
                    tag_of(prev),
                )
                log.warning("leader_blocked_ended", holder=prev, backends=ended)

    async def beat(self) -> None:
        """Renew the heartbeat; raise Deposed when the term moved. A lost leadership connection (the
        database restarted, failed over, or this daemon's backend was ended) is retried with back-off until
        the lock is held again: then the term is still this one (carry on) or it moved (Deposed)."""
        if self.term is None:
            raise Deposed("not leading")
        try:
            if self._conn is None:
                raise DatabaseError("the leadership connection is gone")
            status = await self._conn.execute(
                f"UPDATE leadership SET heartbeat={NOW} WHERE id=1 AND term=$1 AND pid=pg_backend_pid()", self.term
            )
        except LOST as e:
            await asyncio.sleep(self._lost_connection(e, "leader_connection_lost"))
            await self._reclaim()
            return
        if rows_changed(status) != 1:
            self._lose()
            raise Deposed(f"term {self.term} is over")

    async def _reclaim(self) -> None:
        """The lock again with this term still current (returns), or Deposed; retried while unreachable."""
        term = self.term
        while True:
            try:
                conn = await self._connection()
                if not await self._lock(conn):
                    if await conn.fetchval("SELECT term FROM leadership WHERE id=1") != term:
                        break
                    continue  # a standby back from the outage hands it back within its grace
                async with conn.transaction():
                    status = await conn.execute(
                        f"UPDATE leadership SET pid=pg_backend_pid(), heartbeat={NOW} WHERE id=1 AND term=$1", term
                    )
                if rows_changed(status) != 1:
                    break
                log.info("leader_reclaimed", term=term, holder=self.db.holder)
                return
            except LOST as e:
                await asyncio.sleep(self._lost_connection(e, "leader_reclaim_retry"))
        self._lose()
        raise Deposed(f"term {term} is over")

    def stand_down(self) -> None:
        """No longer leading (the daemon demotes itself): the leadership connection, and any lock it holds, go."""
        self._drop()
        self.term = None

    def _lose(self) -> None:
        log.warning("leader_deposed", term=self.term, holder=self.db.holder)
        self.stand_down()
        self.lost.set()

    async def resign(self) -> None:
        """Stop leading: the beat is cleared and the lock freed, so a standby takes over at once."""
        if self._conn is not None and self.term is not None:
            with contextlib.suppress(*LOST):
                await self._conn.execute(
                    "UPDATE leadership SET heartbeat=NULL, pid=NULL WHERE id=1 AND term=$1", self.term
                )
                await self._conn.execute("SELECT pg_advisory_unlock($1, $2)", *LOCK)
                await self._conn.close()
        self.stand_down()
