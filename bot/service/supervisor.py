"""The one place that starts and stops every task of the daemon.

At once: the webhook sender and the hook leases (bot.service.hook_leases). While this daemon leads (at
once on SQLite; on a shared PostgreSQL database once elected, bot.service.leadership): the expiry timer,
and once logged in and joined the sync loop, the outbox workers, the notices and the harness watchers.
SIGTERM/SIGINT (from :meth:`Supervisor.catch_signals`, called before start-up so a stop at any stage
counts) set the daemon's ``stop``; the first task that fails stops the rest. :meth:`Supervisor.run` answers the exit
code: 0 after a stop, 1 after a failure (one clear line: ``matrix_fatal`` or ``daemon_failed``). A leader
whose term ended under it (another daemon took over while this one was paused or cut off) never exits: its
Matrix side is ended at once, closed and built anew (:meth:`bot.service.daemon.Daemon.demote`,
``leader_demoted``), and it stands again as a standby. The state's database lost for a while is never an
exit either: every use of it retries (bot.inbox.db.leader, bot.inbox.db.notify, the loops here).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog

from bot.inbox.db.errors import DATABASE_ERRORS
from bot.inbox.db.fence import Deposed
from bot.matrix.errors import MatrixFatal
from bot.util.aio import on_signals
from bot.util.backoff import Backoff
from bot.util.outage import Outage

if TYPE_CHECKING:
    from bot.service.daemon import Daemon

STOP_GRACE = 10.0  # seconds the running loops get to finish after a stop

log = structlog.get_logger("run")


class Supervisor:
    """Owns the daemon's tasks: starts them, waits for a stop or a failure, and ends them all."""

    def __init__(self, daemon: Daemon, grace: float = STOP_GRACE) -> None:
        self.daemon = daemon
        self.grace = grace

    def catch_signals(self) -> Callable[[], None]:
        """SIGTERM and SIGINT stop the daemon cleanly; returns what removes the handlers."""
        return on_signals(lambda _sig: self.daemon.stop.set())

    async def run(self) -> int:
        """Every task until a stop or a failure; all of them have ended when this returns."""
        d = self.daemon
        webhooks = asyncio.create_task(d.webhooks.run(d.stop), name="webhooks")
        leases = asyncio.create_task(d.leases.run(d.stop), name="hook_leases")
        try:
            return await self._matrix_until_stopped()
        finally:
            d.stop.set()
            await asyncio.gather(webhooks, leases, return_exceptions=True)  # they end on their own once stopped

    async def _matrix_until_stopped(self) -> int:
        """The Matrix side, term after term, until a stop (at any stage) or a failure: 0, or 1 with one line."""
        d = self.daemon
        while True:
            try:
                return await self._term()
            except Deposed as e:  # another daemon leads now: a standby again, never an exit
                await d.demote()
                log.warning("leader_demoted", reason=str(e), role=d.leadership.role,
                            action="the old term's Matrix side closed; standing again as a standby")
                if d.stop.is_set():
                    return 0

    async def _term(self) -> int:
        """One election and the term after it (a task of its own: its fence is that term's alone)."""
        d = self.daemon
        main = asyncio.create_task(self._matrix_side(), name="matrix")
        stopped = asyncio.create_task(d.stop.wait(), name="stop")
        await asyncio.wait([main, stopped], return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if not main.done():  # stopped: running loops end on their own; a log-in waiting on the network is cancelled
            await asyncio.wait([main], timeout=self.grace if d.ready else 0)
            main.cancel()  # nothing when it ended within the grace
        try:
            await main
        except asyncio.CancelledError:
            if not d.stop.is_set():
                raise
        except MatrixFatal as e:
            log.error("matrix_fatal", error=str(e))
            return 1
        except Deposed:
            if d.stop.is_set():
                return 0
            raise
        except Exception as e:
            log.exception("daemon_failed", error=f"{type(e).__name__}: {e}")
            return 1
        return 0

    async def _matrix_side(self) -> None:
        """A standby until elected (bot.service.leadership), then the Matrix side while leading."""
        await self.daemon.leadership.elect()
        await self.daemon.leadership.while_leading(self._leading)

    async def _connect(self) -> None:
        """Log in and join; the state's database away meanwhile is "not now": retried, never an exit."""
        pace = Backoff(0.5, 5.0)
        outage = Outage(log, "matrix_connect_state_unavailable", "matrix_connect_state_back")
        while True:
            try:
                await self.daemon.connect()
                outage.ok()
                return
            except DATABASE_ERRORS as e:
                delay = pace.delay()
                outage.failed(str(e), delay)
                await asyncio.sleep(delay)

    async def _leading(self) -> None:
        """Log in and join, then run sync, outbox, notices, timer and watchers until a stop or the first failure."""
        d = self.daemon
        tasks = [asyncio.create_task(d.timer_loop(), name="timer")]  # expiry goes on while logging in
        waiter = asyncio.create_task(d.stop.wait())
        try:
            await self._connect()
            tasks += d.matrix_tasks()
            done, _ = await asyncio.wait([*tasks, waiter], return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                if t in tasks and t.exception() is not None:
                    raise t.exception()  # type: ignore[misc]
        finally:
            waiter.cancel()
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
