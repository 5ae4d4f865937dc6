"""The inbox part for hook holders: which daemon holds a hook's request live, and whose lease ran out.

A hook's request records the holder id of the daemon whose HTTP connection the hook waits on
(``requests.held_by``, set in the submit's transaction: ``Requests.submit(held_by=...)``). On a shared
PostgreSQL database each daemon renews its lease (``daemon_leases``, the database's clock, so hosts'
clocks never matter); :meth:`Holds.orphaned` finds, by the ``requests_held`` index, the pending requests
whose holder is gone. The policy (when to renew, when to judge) is ``bot.service.hook_leases``.
"""

from __future__ import annotations

from bot.inbox.base import InboxBase
from bot.inbox.record import Record

NOW = "EXTRACT(EPOCH FROM clock_timestamp())::float8"  # PostgreSQL's clock, in epoch seconds
FORGET_AFTER = 3600.0  # a lease row not renewed for this long is deleted (its requests are long withdrawn)
HELD_ELSEWHERE = "SELECT * FROM requests WHERE held_by IS NOT NULL AND state='pending' AND held_by <> $1"


class Holds(InboxBase):
    """Renew, drop and judge the daemons' leases; find the hook requests nobody holds."""

    async def renew_lease(self, holder: str) -> None:
        """PostgreSQL: this daemon is alive now (by the database's clock). SQLite: nothing (one daemon)."""
        if not self.database.dialect.is_postgres:
            return
        await self.database.execute(
            f"INSERT INTO daemon_leases (holder, heartbeat) VALUES ($1, {NOW})"
            " ON CONFLICT (holder) DO UPDATE SET heartbeat = excluded.heartbeat",
            holder,
        )

    async def drop_lease(self, holder: str) -> None:
        """A clean stop: this daemon holds nothing any more."""
        if self.database.dialect.is_postgres:
            await self.database.execute("DELETE FROM daemon_leases WHERE holder=$1", holder)

    async def orphaned(self, holder: str, lease: float) -> list[Record]:
        """Pending hook requests held by another daemon that is gone: on PostgreSQL one whose lease was not
        renewed for ``lease`` seconds (or never was); on SQLite any earlier run (one daemon at a time).
        An indexed read (``requests_held``), never every pending request."""
        if not self.database.dialect.is_postgres:
            return await self._records(HELD_ELSEWHERE, holder)
        await self.database.execute(f"DELETE FROM daemon_leases WHERE heartbeat < {NOW} - $1::float8", FORGET_AFTER)
        return await self._records(
            f"{HELD_ELSEWHERE} AND held_by NOT IN"
            f" (SELECT holder FROM daemon_leases WHERE heartbeat >= {NOW} - $2::float8)",
            holder, float(lease),
        )
