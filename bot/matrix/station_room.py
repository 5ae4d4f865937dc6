"""One station room's parts over the bot's one client: its state, trust, encryption, sends and notices.

The default room (``[matrix] room``) and every ``[[rooms]]`` entry get one each; they share the nio
client, the key/value store, the first-sync event and the E2EE lock (one Olm account). Each room's
encryption is its own (one room encrypted, another not); its notices go into it alone.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from nio import AsyncClient, JoinError, RoomResolveAliasResponse

from bot.config import MatrixConfig
from bot.matrix.e2ee import E2EE
from bot.matrix.errors import MatrixFatal
from bot.matrix.gate import RateGate
from bot.matrix.notices import Notices
from bot.matrix.probe import until_allowed
from bot.matrix.rate import BACKGROUND
from bot.matrix.refusal import Refusal
from bot.matrix.retry import retry
from bot.matrix.sender import Sender
from bot.matrix.station import EventHandler, KeyValue, Station
from bot.matrix.trust import Trust
from bot.matrix.undecryptable import Undecryptable

log = structlog.get_logger("matrix")


class StationRoom:
    """One station room: ``name`` (the config's), its id once resolved, and its parts."""

    def __init__(
        self, name: str, client: AsyncClient, cfg: MatrixConfig, kv: KeyValue, *,
        synced: asyncio.Event, lock: asyncio.Lock, gate: RateGate, on_refused: EventHandler | None = None,
    ) -> None:
        """``cfg``: the [matrix] table with ``room`` this room's id or alias."""
        self.name = name
        self.station = Station(client, cfg, kv, name=name)
        self.notices = Notices(self.send)  # this room's m.notice chatter
        self.trust = Trust(self.station, self.notices.post, on_refused)
        self.e2ee = E2EE(self.station, self.trust, lock)
        self.undecryptable = Undecryptable(self.station, self.trust, self.notices.post)
        self.refusal = Refusal(self.station)
        self.sender = Sender(self.station, self.e2ee, self.refusal, synced, gate)
        self.joined = True  # False after the bot left or was removed from the room
        self.handler: EventHandler | None = None  # its events, in timeline order (set by the sync's caller)

    @property
    def room_id(self) -> str:
        return self.station.room_id

    @property
    def encrypted(self) -> bool:
        return self.station.encrypted

    async def join(self) -> str:
        """Resolve the room (an alias to its id) and join it (accepting its invite)."""
        st, room = self.station, self.station.cfg.room
        key = "matrix.room" if self.name == "default" else f"rooms.{self.name}.room"
        if room.startswith("#"):
            r = await retry("resolve_alias", lambda: st.client.room_resolve_alias(room))
            if not isinstance(r, RoomResolveAliasResponse):
                raise MatrixFatal(f"{key}: cannot resolve {room}: {getattr(r, 'message', r)}")
            room = r.room_id
        st.room_id = room
        r = await until_allowed("join", lambda: st.client.join(room))
        if isinstance(r, JoinError):
            raise MatrixFatal(f"{key}: cannot join {room} ({r.status_code}: {r.message}); "
                              f"invite {st.cfg.user_id} first")
        log.info("matrix_joined", room_id=room, room=self.name)
        return room

    async def send(
        self, content: dict[str, Any], txn: str, event_type: str = "m.room.message", *,
        kind: str = BACKGROUND, order: float | None = None,
    ) -> str:
        """Send into this room with ``txn``; the event id, or SendFailed (``kind``, ``order``: see Sender.send)."""
        return await self.sender.send(content, txn, event_type, kind=kind, order=order)
