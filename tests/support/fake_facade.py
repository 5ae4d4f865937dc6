"""Stand-ins one level above the fake homeserver (tests/support/fakematrix.py): the ``Matrix`` façade's
sending surface alone, and the key/value store the Matrix side keeps its bits in."""

from __future__ import annotations

import asyncio
import json
from typing import Any


class MemoryKV:
    """The Matrix side's key/value store, in memory (the inbox's ``get_json``/``set_json``)."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}

    async def get_json(self, k: str) -> Any:
        return json.loads(json.dumps(self.data[k])) if k in self.data else None

    async def set_json(self, k: str, v: Any) -> None:
        self.data[k] = json.loads(json.dumps(v))

    async def set_many_json(self, values: dict[str, Any]) -> None:
        for k, v in values.items():
            await self.set_json(k, v)


class FakeMatrix:
    """The ``Matrix`` façade's sending surface alone: sends take a little while (as a homeserver persisting
    one room's events in order would) and are recorded in order."""

    def __init__(self, latency: float = 0.01) -> None:
        self.latency = latency
        self.sent: list[tuple[str, str]] = []  # (kind, txn)
        self._n = 0
        self._room = asyncio.Lock()

    rate_limited = False

    def spare_send(self, what: str) -> bool:
        return True

    async def send(
        self, content: dict[str, Any], txn: str, event_type: str = "m.room.message", *, room: str = "default",
        kind: str = "background", order: float | None = None,
    ) -> str:
        async with self._room:
            await asyncio.sleep(self.latency)
        rel = content.get("m.relates_to", {})
        kind = "reaction" if event_type == "m.reaction" else ("edit" if rel.get("rel_type") == "m.replace" else "post")
        self.sent.append((kind, txn))
        self._n += 1
        return f"$ev{self._n}"

    async def redact(self, event_id: str, txn: str, reason: str | None = None, *, room: str = "default") -> None:
        async with self._room:
            await asyncio.sleep(self.latency)
        self.sent.append(("redact", txn))

    def kinds(self) -> list[str]:
        return [k for k, _t in self.sent]
