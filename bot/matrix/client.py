"""The Matrix side: log in or restore, join the station room, sync, send.

Knows nothing of ACP. It reads and writes its own durable bits (session, sync
token, sync filter, events waiting for their room key) through a small key/value
store, and hands every station-room event, in order, to one handler. ``next_batch``
is saved only after its batch is handled.

Encrypted rooms (matrix-nio's ``e2e`` extra, vodozemac): the Olm account and the
Megolm sessions live in nio's store under ``[state] path``, opened for the saved
device on every start. Sends into an encrypted room are encrypted (reactions too);
decrypted events reach the handler shaped exactly like plaintext events. An event
that cannot be decrypted yet is kept aside (durably), its key is requested, and it
is retried after every sync; after ``[matrix] undecryptable_wait`` its sender is
asked, once, to send it again. See docs/encryption.md.

``Matrix`` is the façade over its parts: session.py (log-in), sender.py (sends),
sync.py and sync_filter.py (the sync loop), e2ee.py, trust.py, undecryptable.py,
refusal.py (encrypted rooms), notices.py (the bot's own m.notice chatter, which the
parts post through).
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from nio import AsyncClient, AsyncClientConfig, JoinError, RoomResolveAliasResponse
from nio.crypto import ENCRYPTION_ENABLED

from bot.config import MatrixConfig
from bot.matrix import key_upload
from bot.matrix.e2ee import E2EE, UNREACHABLE_RETRY
from bot.matrix.errors import MatrixFatal, SendFailed
from bot.matrix.notices import Notices
from bot.matrix.refusal import REFUSAL_KEY, Refusal
from bot.matrix.retry import retry
from bot.matrix.room import RoomState
from bot.matrix.sender import FIRST_SYNC_WAIT, Sender
from bot.matrix.session import CRYPTO_KEY, SESSION_KEY, Session
from bot.matrix.station import EventHandler, KeyValue, Say, Station
from bot.matrix.store import STORE
from bot.matrix.sync import SYNC_KEY, Syncer
from bot.matrix.sync_filter import SyncFilter
from bot.matrix.trust import Trust
from bot.matrix.txn import txn_id
from bot.matrix.undecryptable import WAITING_KEEP, WAITING_KEY, WAITING_MAX, Undecryptable

__all__ = [  # the names importable from here before the split stay importable
    "CRYPTO_KEY",
    "FIRST_SYNC_WAIT",
    "REFUSAL_KEY",
    "SESSION_KEY",
    "SYNC_KEY",
    "UNREACHABLE_RETRY",
    "WAITING_KEEP",
    "WAITING_KEY",
    "WAITING_MAX",
    "EventHandler",
    "KeyValue",
    "Matrix",
    "MatrixFatal",
    "Say",
    "SendFailed",
    "txn_id",
]

log = structlog.get_logger("matrix")


class Matrix:
    """One logged-in bot account and its station room."""

    def __init__(
        self, cfg: MatrixConfig, kv: KeyValue, store_path: str, on_refused: EventHandler | None = None
    ) -> None:
        """``on_refused`` sees each event the trust policy keeps from the handler (never an answer)."""
        self.cfg = cfg
        self.kv = kv
        self.encryption = cfg.encryption
        self.client = AsyncClient(
            cfg.homeserver,
            cfg.user_id,
            store_path=store_path,
            config=AsyncClientConfig(
                max_timeouts=1,
                max_limit_exceeded=3,
                request_timeout=60,
                encryption_enabled=cfg.encryption and ENCRYPTION_ENABLED,
                store_sync_tokens=False,  # our own loop keeps next_batch in the inbox
                store=STORE,  # no store write on a sync that found no room newly encrypted
            ),
        )
        self.station = Station(self.client, cfg, kv)
        self.session = Session(self.station, store_path)
        self.notices = Notices(self.send)  # the bot's m.notice chatter; the parts below post through it
        self.trust = Trust(self.station, self.notices.post, on_refused)
        self.e2ee = E2EE(self.station, self.trust)
        self.undecryptable = Undecryptable(self.station, self.trust, self.notices.post)
        self.refusal = Refusal(self.station)
        self.syncer = Syncer(
            self.station, self.e2ee, self.trust, self.undecryptable, self.refusal,
            sync_filter=SyncFilter(self.station), on_token_revoked=self.session.relogin,
        )
        self.sender = Sender(self.station, self.e2ee, self.refusal, self.syncer.synced)

    @property
    def user_id(self) -> str:
        return self.station.user_id

    @property
    def room_id(self) -> str:
        return self.station.room_id

    @property
    def room(self) -> RoomState:
        return self.station.room

    @property
    def refused(self) -> bool:
        """Encrypted room with encryption = false: nothing is posted."""
        return self.refusal.refused

    @property
    def connected(self) -> bool:
        return self.syncer.connected

    @property
    def last_sync_ok(self) -> float:
        return self.syncer.last_sync_ok

    @property
    def sync_lag(self) -> float:
        return self.syncer.sync_lag

    @property
    def send_errors(self) -> int:
        return self.sender.send_errors

    @property
    def send_failing(self) -> str | None:
        return self.sender.send_failing

    @property
    def cross_signing(self) -> dict[str, Any]:
        return self.session.cross_signing

    # -- session (session.py) ------------------------------------------------
    async def login(self) -> None:
        """Restore the saved session, else use the configured token, else log in once."""
        await self.session.login()

    async def relogin(self, code: str) -> None:
        """The homeserver revoked the token: log in again with the password (a new device), inbox kept."""
        await self.session.relogin(code)

    @property
    def room_encrypted(self) -> bool:
        """Is the station room encrypted (as far as the syncs so far tell)?"""
        return self.station.encrypted

    # -- the station room --------------------------------------------------
    async def resolve_room(self) -> str:
        """The configured room as a room id (an alias is resolved)."""
        room = self.cfg.room
        if room.startswith("#"):
            r = await retry("resolve_alias", lambda: self.client.room_resolve_alias(room))
            if not isinstance(r, RoomResolveAliasResponse):
                raise MatrixFatal(f"matrix.room: cannot resolve {room}: {getattr(r, 'message', r)}")
            room = r.room_id
        self.station.room_id = room
        return room

    async def join_room(self) -> str:
        """Resolve the configured room and join it (accepting its invite)."""
        room = await self.resolve_room()
        r = await retry("join", lambda: self.client.join(room))
        if isinstance(r, JoinError):
            raise MatrixFatal(
                f"matrix.room: cannot join {room} ({r.status_code}: {r.message}); invite {self.cfg.user_id} first"
            )
        log.info("matrix_joined", room_id=room)
        return room

    async def sync_forever(self, handler: EventHandler, stop: asyncio.Event) -> None:
        """Our own sync loop (see sync.py) until ``stop`` is set."""
        await self.syncer.run(handler, stop)

    # -- sending (sender.py) ---------------------------------------------------
    async def send(self, content: dict[str, Any], txn: str, event_type: str = "m.room.message") -> str:
        """Send into the station room with ``txn``; returns the event id or raises SendFailed."""
        return await self.sender.send(content, txn, event_type)

    async def redact(self, event_id: str, txn: str, reason: str | None = None) -> None:
        """Redact one of the bot's own events in the station room (redactions are never encrypted)."""
        await self.sender.redact(event_id, txn, reason)

    async def close(self) -> None:
        await key_upload.finish()
        await self.client.close()
