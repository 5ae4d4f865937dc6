"""The Matrix side: log in or restore, join the station room, sync, send.

Knows nothing of ACP. It reads and writes its own durable bits (session, sync
token, sync filter, events waiting for their room key) through a small key/value
store, and hands every station-room event, in order, to one handler. ``next_batch``
is saved only after its batch is handled.

Encrypted rooms (matrix-nio's ``e2e`` extra, vodozemac): the Olm account and the Megolm
sessions live in nio's store under ``[state] path``; decrypted events reach the handler
shaped exactly like plaintext events. See docs/encryption.md.

``Matrix`` is the façade over its parts (the package's docstring lists them), built and wired here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from nio import AsyncClient, AsyncClientConfig
from nio.crypto import ENCRYPTION_ENABLED

from bot.config import MatrixConfig
from bot.matrix import key_upload
from bot.matrix.errors import MatrixFatal, SendFailed
from bot.matrix.gate import RateGate
from bot.matrix.rate import BACKGROUND
from bot.matrix.session import CRYPTO_KEY, SESSION_KEY, Session
from bot.matrix.station import EventHandler, KeyValue
from bot.matrix.station_room import StationRoom
from bot.matrix.store import STORE
from bot.matrix.sync import SYNC_KEY, Syncer
from bot.matrix.sync_filter import SyncFilter
from bot.matrix.txn import txn_id
from bot.matrix.vault import Vault

__all__ = ["CRYPTO_KEY", "SESSION_KEY", "SYNC_KEY", "Matrix", "SendFailed", "txn_id"]  # importable from here


class Matrix:
    """One logged-in bot account and its station room."""

    def __init__(
        self, cfg: MatrixConfig, kv: KeyValue, store_path: str, *, rooms: list[tuple[str, str]] | None = None,
        refused_for: Callable[[str], EventHandler] | None = None, durable_device: bool = False,
    ) -> None:
        """``rooms``: more station rooms as (name, id or alias), beside ``cfg.room`` (``default``);
        ``refused_for``: a room's name -> what sees each event the trust policy keeps from its handler;
        ``durable_device``: the state is in PostgreSQL, the crypto store's copy too (vault.py)."""
        self.client = AsyncClient(
            cfg.homeserver,
            cfg.user_id,
            store_path=store_path,
            config=AsyncClientConfig(
                max_timeouts=1,
                max_limit_exceeded=0,  # a refusal for rate comes back at once: the sender's gate orders the retries
                request_timeout=60,
                encryption_enabled=cfg.encryption and ENCRYPTION_ENABLED,
                store_sync_tokens=False,  # our own loop keeps next_batch in the inbox
                store=STORE,  # no store write on a sync that found no room newly encrypted
            ),
        )
        synced, lock = asyncio.Event(), asyncio.Lock()
        self.gate = RateGate()  # the homeserver limits the account: one gate for every room's sends
        self.rooms: dict[str, StationRoom] = {}
        for name, ref in [("default", cfg.room), *(rooms or [])]:
            self.rooms[name] = StationRoom(
                name, self.client, cfg.model_copy(update={"room": ref}), kv, synced=synced, lock=lock, gate=self.gate,
                on_refused=refused_for(name) if refused_for is not None else None,
            )
        default = self.rooms["default"]  # the parts of [matrix] room, as before there were more
        self.station, self.notices, self.sender = default.station, default.notices, default.sender
        self.vault = Vault(self.client, store_path, kv) if durable_device and cfg.encryption else None
        self.session = Session(self.station, store_path, self.vault)
        self.syncer = Syncer(
            self.station, list(self.rooms.values()), on_token_revoked=self.session.relogin, vault=self.vault,
            sync_filter=SyncFilter(self.station, lambda: [r.room_id for r in self.rooms.values()]),
        )
        self.syncer.synced = synced

    @property
    def user_id(self) -> str:
        return self.station.user_id

    # -- the station room --------------------------------------------------
    async def join_room(self) -> str:
        """Resolve every station room and join it (accepting its invite); the default room's id.
        Two entries that name one room (an alias and its id) stop the bot: a room has one set of answerers."""
        seen: dict[str, str] = {}
        for r in self.rooms.values():
            rid = await r.join()
            if rid in seen:
                raise MatrixFatal(f'rooms.{r.name}.room: {rid} is already room "{seen[rid]}"')
            seen[rid] = r.name
        return self.station.room_id

    async def sync_forever(
        self, handler: EventHandler, stop: asyncio.Event, handler_for: Callable[[str], EventHandler] | None = None
    ) -> None:
        """Our own sync loop (see sync.py) until ``stop`` is set; ``handler_for``: a room's name -> the
        handler of its events (else ``handler`` takes every room's)."""
        for r in self.rooms.values():
            r.handler = handler_for(r.name) if handler_for is not None else None
        await self.syncer.run(handler, stop)

    # -- sending (sender.py) ---------------------------------------------------
    async def send(
        self, content: dict[str, Any], txn: str, event_type: str = "m.room.message", *, room: str = "default",
        kind: str = BACKGROUND, order: float | None = None,
    ) -> str:
        """Send into the station room named ``room`` with ``txn``; returns the event id or raises SendFailed.
        ``kind`` (bot.matrix.rate: PROMPT, EDIT, BACKGROUND) and ``order`` (its request's arrival) place it while
        the homeserver rate-limits the bot (bot/matrix/gate.py)."""
        return await self._room(room).send(content, txn, event_type, kind=kind, order=order)

    @property
    def rate_limited(self) -> bool:
        """Is the homeserver rate-limiting the bot's account now (a refusal seen, the limit not over)."""
        return self.gate.bucket.limited

    @property
    def rate_refusals(self) -> int:
        """Sends the homeserver refused for rate, so far."""
        return self.gate.refusals

    def spare_send(self, what: str) -> bool:
        """May an optional send (``what``: a keycap seed) be spent now; else it is counted as left out."""
        if self.gate.spare():
            return True
        self.gate.bucket.skipped(what)
        return False

    async def put_state(
        self, event_type: str, content: dict[str, Any], state_key: str = "", *, room: str = "default"
    ) -> str:
        """Set a state event in the station room named ``room`` (never encrypted); its event id, or SendFailed."""
        return await self._room(room).sender.put_state(event_type, content, state_key)

    async def redact(self, event_id: str, txn: str, reason: str | None = None, *, room: str = "default") -> None:
        """Redact one of the bot's own events in the station room ``room`` (redactions are never encrypted)."""
        await self._room(room).sender.redact(event_id, txn, reason)

    def _room(self, name: str) -> StationRoom:
        """The station room ``name``; SendFailed when the config no longer has it (a record kept from before)."""
        found = self.rooms.get(name)
        if found is None:
            raise SendFailed(f"room {name!r} is not in the config ([[rooms]]): nothing is sent there")
        return found

    async def close(self) -> None:
        await key_upload.finish()
        await self.client.close()
