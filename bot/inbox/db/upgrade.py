"""Versioned schema steps, per engine, kept in one ``schema_versions`` table (mautrix's ``UpgradeTable``).

Each named table of steps (``inbox``, ``leadership``, later the crypto store) records its version in
``schema_versions``. Steps run in order, each in its own transaction, which first takes the upgrade
lock (an advisory lock on PostgreSQL, where several daemons may start at once; ``BEGIN IMMEDIATE``
on SQLite) and reads the version again, so a step never runs twice. A database newer than this code
is refused with one clear line. Never edit a step that shipped: append one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.inbox.db.base import Connection, Database

Body = str | Callable[[Connection], Awaitable[None]]
"""A step for one engine: a script (statements cut at ``;``, DDL types filled in) or a function."""
UPGRADE_LOCK = 0x70625F7570  # the advisory lock every upgrade transaction takes on PostgreSQL ("pb_up")
VERSIONS = "CREATE TABLE IF NOT EXISTS schema_versions (name TEXT PRIMARY KEY, version INTEGER NOT NULL)"


class SchemaTooNew(Exception):
    """The database was written by a newer permission-bot."""


@dataclass(frozen=True)
class Step:
    """One version: what it does on each engine (a script written once for both serves as both)."""

    description: str
    sqlite: Body
    postgresql: Body


def both(description: str, script: str) -> Step:
    """A step whose one DDL template (``{REAL}``, ``{SERIAL_PK}``, ...) serves both engines."""
    return Step(description, script, script)


async def run(body: Body, conn: Connection) -> None:
    """One engine's step body, in ``conn``'s transaction."""
    if isinstance(body, str):
        await conn.script(conn.dialect.ddl(body))
    else:
        await body(conn)


@dataclass(frozen=True)
class UpgradeTable:
    """The steps of one schema, by name. ``legacy`` gives the version of a database made before
    ``schema_versions`` (e.g. SQLite's ``PRAGMA user_version``); without it, none recorded means 0."""

    name: str
    steps: list[Step]
    legacy: Callable[[Connection], Awaitable[int]] | None = None

    @property
    def latest(self) -> int:
        return len(self.steps)

    async def version(self, conn: Connection) -> int:
        """The version recorded (inside a transaction that made ``schema_versions``)."""
        v = await conn.fetchval("SELECT version FROM schema_versions WHERE name=$1", self.name)
        if v is not None:
            return int(v)
        return await self.legacy(conn) if self.legacy is not None else 0

    async def upgrade(self, db: Database, where: str = "") -> int:
        """Bring ``db`` up to ``latest``; the version reached. Raises SchemaTooNew for a newer database."""
        while True:
            async with db.transaction() as conn:
                conn.allow_slow()
                if conn.dialect.is_postgres:
                    await conn.execute("SELECT pg_advisory_xact_lock($1)", UPGRADE_LOCK)
                await conn.execute(VERSIONS)
                current = await self.version(conn)
                if current > self.latest:
                    raise SchemaTooNew(
                        f"{where or db.target.shown}: the {self.name} schema is at version {current}, newer than "
                        f"this permission-bot knows ({self.latest}); upgrade permission-bot or restore a backup"
                    )
                if current == self.latest:
                    return current
                step = self.steps[current]
                await run(step.postgresql if conn.dialect.is_postgres else step.sqlite, conn)
                await conn.execute(
                    "INSERT INTO schema_versions (name, version) VALUES ($1, $2)"
                    " ON CONFLICT (name) DO UPDATE SET version=excluded.version",
                    self.name,
                    current + 1,
                )
