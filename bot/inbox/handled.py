"""The inbox part for room events and small values: events handled (never twice), events parked until
their prompt's id is recorded, and key/value entries (the sync token, the Matrix session)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

from bot.inbox.base import InboxBase
from bot.inbox.record import dumps

SET_KV = "INSERT INTO kv (k, v) VALUES ($1, $2) ON CONFLICT(k) DO UPDATE SET v=excluded.v"


class Handled(InboxBase):
    """Handled and parked events, key/value."""

    async def is_handled(self, event_id: str) -> bool:
        return await self.database.fetchrow("SELECT 1 FROM handled WHERE event_id=$1", event_id) is not None

    async def mark_handled(self, event_id: str, now: float) -> bool:
        """Remember an event; False when it was already handled."""
        return await self.database.execute(
            "INSERT OR IGNORE INTO handled (event_id, at) VALUES ($1, $2)", event_id, float(now)
        ) == 1

    async def park(self, event_id: str, source: dict[str, Any], now: float) -> None:
        """Keep an event that answers a prompt whose event id is not recorded yet."""
        await self.database.execute(
            "INSERT OR IGNORE INTO parked (event_id, source, at) VALUES ($1, $2, $3)",
            event_id, dumps(source), float(now),
        )

    async def take_parked(self) -> list[dict[str, Any]]:
        """Every parked event, oldest first, removed from the parking."""
        async with self.database.transaction() as db:
            rows = await db.fetch("SELECT source FROM parked ORDER BY at, rowid")
            await db.execute("DELETE FROM parked")
        return [json.loads(r[0]) for r in rows]

    async def get_kv(self, k: str) -> str | None:
        v = await self.database.fetchval("SELECT v FROM kv WHERE k=$1", k)
        return None if v is None else str(v)

    async def kv_with_prefix(self, prefix: str) -> dict[str, str]:
        """Every kv entry whose key starts with ``prefix``, by key."""
        rows = await self.database.fetch("SELECT k, v FROM kv WHERE substr(k, 1, $1) = $2", len(prefix), prefix)
        return {str(r[0]): str(r[1]) for r in rows}

    async def set_kv(self, k: str, v: str) -> None:
        await self.database.execute(SET_KV, k, v)

    async def made_once(self, k: str) -> str:
        """The value of ``k``: a random hex made the first time it is asked for, then kept."""
        async with self.database.transaction() as db:
            await db.execute("INSERT OR IGNORE INTO kv (k, v) VALUES ($1, $2)", k, uuid.uuid4().hex)
            v = await db.fetchval("SELECT v FROM kv WHERE k=$1", k)
        assert v is not None
        return str(v)

    async def get_json(self, k: str) -> Any:
        v = await self.get_kv(k)
        return json.loads(v) if v is not None else None

    async def set_json(self, k: str, v: Any) -> None:
        await self.set_kv(k, dumps(v))

    async def set_many_json(self, values: Mapping[str, Any]) -> None:
        """Several values in one transaction (a sync token and the crypto store it goes with)."""
        async with self.database.transaction() as db:
            for k, v in values.items():
                await db.execute(SET_KV, k, dumps(v))
