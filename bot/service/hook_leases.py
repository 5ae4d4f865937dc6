"""Each daemon owns the hooks it holds: only requests whose holder is really gone are withdrawn.

A hook waits for its answer on one daemon's HTTP connection, and that daemon's holder id is kept with
the request (``requests.held_by``). When the holder goes (stopped, crashed, killed), no answer can reach
the hook any more, so its request is withdrawn (settled cancelled, the prompt edited to say why).

- SQLite: one daemon at a time. At its start, before the API takes a hook, it withdraws every request an
  earlier run held (as always: :data:`RESTARTED`).
- PostgreSQL, several daemons: a daemon's start withdraws nothing by itself. Each daemon renews its lease
  every :data:`BEAT` seconds (the database's clock), the first time before its API takes a hook, and
  withdraws the requests whose holder's lease is older than :data:`LEASE` (:data:`HOLDER_GONE`): a daemon
  killed -9 loses its hooks' requests within about ``LEASE + BEAT`` seconds, a live one never. A daemon
  judges others only after renewing its own lease without a gap for ``LEASE`` seconds: after a database
  outage, which stops every daemon's renewals alike, nobody is taken for gone before it could renew.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog

from bot.events.states import Via
from bot.inbox.record import Settlement
from bot.inbox.store import Inbox
from bot.util.aio import sleep_unless_stopped
from bot.util.outage import Outage

log = structlog.get_logger("hooks")

BEAT = 2.0  # seconds between two renewals of a daemon's lease
LEASE = 10.0  # a holder whose lease is older than this is gone

RESTARTED = "withdrawn: the daemon restarted while the hook waited, so no answer could reach it"
HOLDER_GONE = "withdrawn: the daemon the hook waited on stopped, so no answer could reach it"


def withdrawn_by(cli: str) -> str:
    """The ``answered_by`` of a request its hook withdrew (the reason goes in the feedback)."""
    return f"{cli} hook"


class HookLeases:
    """This daemon's lease, and withdrawing what gone holders held."""

    def __init__(
        self, inbox: Inbox, holder: str, now: Callable[[], float], *, beat: float = BEAT, lease: float = LEASE
    ) -> None:
        """``holder``: this daemon's id (its hooks' ``held_by``); ``now``: the settlement clock."""
        self.inbox = inbox
        self.holder = holder
        self.now = now
        self.beat = beat
        self.lease = lease
        self.shared = inbox.database.dialect.is_postgres
        self._live_since: float | None = None  # since when this daemon renewed its lease without a gap
        self._last: float | None = None
        self._outage = Outage(log, "hook_lease_failed", "hook_lease_back")  # one warning an outage, one info

    async def start(self) -> None:
        """Before the API takes hooks: the first renewal (PostgreSQL), or an earlier run's hooks withdrawn (SQLite)."""
        if not self.shared:
            await self._withdraw_orphans(RESTARTED)
            return
        try:
            await self._renew()
        except Exception as e:  # the database is away for now: run() tries again; nothing is withdrawn meanwhile
            log.warning("hook_lease_failed", error=f"{type(e).__name__}: {e}")

    async def run(self, stop: asyncio.Event) -> None:
        """PostgreSQL: renew and judge every ``beat`` seconds until ``stop``. SQLite: nothing to do."""
        if not self.shared:
            return
        while not stop.is_set():
            try:
                await self._renew()
                if self._live_since is not None and time.monotonic() - self._live_since >= self.lease:
                    await self._withdraw_orphans(HOLDER_GONE)
            except Exception as e:  # a database outage: a gap in this daemon's renewals, so it judges nobody
                self._live_since = None
                self._outage.failed(e)
            else:
                self._outage.ok()
            await sleep_unless_stopped(stop, self.beat)

    async def close(self) -> None:
        """A clean stop: drop the lease (what this daemon still held goes to the others at once)."""
        if self.shared and self._last is not None:  # it renewed at least once (else there is nothing to drop)
            try:
                await self.inbox.drop_lease(self.holder)
            except Exception as e:
                log.warning("hook_lease_failed", error=f"{type(e).__name__}: {e}")

    async def _renew(self) -> None:
        await self.inbox.renew_lease(self.holder)
        now = time.monotonic()
        if self._live_since is None or self._last is None or now - self._last > self.lease / 2:  # after a gap
            self._live_since = now
        self._last = now

    async def _withdraw_orphans(self, why: str) -> None:
        n = 0
        for rec in await self.inbox.orphaned(self.holder, self.lease):
            by = withdrawn_by(rec.label or "a")
            settled = await self.inbox.settle(rec.id, Settlement(None, by, Via.CANCEL, self.now(), why))
            if settled is not None:  # else settled meanwhile (another daemon withdrew it, or an answer came)
                log.info("hook_request_withdrawn", request_id=rec.id, by=by, why=why)
                n += 1
        if n:
            log.info("hook_orphans_withdrawn", count=n, reason=why)
