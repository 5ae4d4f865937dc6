"""What the parts of the Matrix side share: nio's client, the config, the store and the station room."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from nio import AsyncClient

from bot.config import MatrixConfig
from bot.matrix.room import RoomState

EventHandler = Callable[[dict[str, Any]], Awaitable[None]]
Say = Callable[..., None]  # Notices.post(text, *, reply_to=..., thread_root=...)


class KeyValue(Protocol):
    """Where the Matrix side keeps its session, sync token and (PostgreSQL) its device."""

    async def get_json(self, k: str) -> Any: ...

    async def set_json(self, k: str, v: Any) -> None: ...

    async def set_many_json(self, values: Mapping[str, Any]) -> None: ...  # several values in one transaction


@dataclass
class Station:
    """The station room (its id once resolved, its state) and the client and store every part uses."""

    client: AsyncClient
    cfg: MatrixConfig
    kv: KeyValue
    room_id: str = ""
    room: RoomState = field(default_factory=RoomState)
    name: str = "default"  # the room's name in the config ([[rooms]]; "default": [matrix] room)

    def key(self, k: str) -> str:
        """A key/value key of this room's own (the default room keeps the names it always had)."""
        return k if self.name == "default" else f"{k}@{self.name}"

    @property
    def user_id(self) -> str:
        return str(self.client.user_id)

    @property
    def encrypted(self) -> bool:
        """Is the station room encrypted (as far as the syncs so far tell)?"""
        return self.room.encrypted or self.room_id in self.client.encrypted_rooms
