"""The Matrix side: log in or restore, join the station room, sync, send.

Knows nothing of ACP. It reads and writes its own durable bits (session, sync
token, events waiting for their room key) through a small key/value store, and
hands every station-room event, in order, to one handler. ``next_batch`` is saved
only after its batch is handled.

Encrypted rooms (matrix-nio's ``e2e`` extra, vodozemac): the Olm account and the
Megolm sessions live in nio's store under ``[state] path``, opened for the saved
device on every start. Sends into an encrypted room are encrypted (reactions too);
decrypted events reach the handler shaped exactly like plaintext events. An event
that cannot be decrypted yet is kept aside (durably), its key is requested, and it
is retried after every sync; after ``[matrix] undecryptable_wait`` its sender is
asked, once, to send it again. See docs/encryption.md.

``Matrix`` is the façade: the session and sending live here; the parts it holds do
the rest (sync.py, e2ee.py, trust.py, undecryptable.py, refusal.py).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import structlog
from nio import (
    AsyncClient,
    AsyncClientConfig,
    ErrorResponse,
    JoinError,
    KeysUploadError,
    LoginResponse,
    RoomGetStateEventResponse,
    RoomResolveAliasResponse,
    RoomSendResponse,
    WhoamiResponse,
)
from nio.crypto import ENCRYPTION_ENABLED

from bot.config import MatrixConfig
from bot.logs import add_secret
from bot.matrix import cross_signing, key_upload
from bot.matrix.crypto import accept_forwards_from_session_owner, fingerprint
from bot.matrix.e2ee import E2EE, UNREACHABLE_RETRY
from bot.matrix.errors import REVOKED, MatrixFatal, SendFailed, TokenRevoked
from bot.matrix.refusal import REFUSAL_KEY, Refusal
from bot.matrix.retry import describe, retry
from bot.matrix.room import RoomState
from bot.matrix.station import EventHandler, KeyValue, Say, Station
from bot.matrix.sync import SYNC_KEY, Syncer
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

SESSION_KEY = "matrix.session"
CRYPTO_KEY = "matrix.crypto"  # {"device_id", "ed25519", "curve25519"}: for doctor, written after login

FIRST_SYNC_WAIT = 60.0  # sends wait this long for the first sync (room state, encryption) before failing


class Matrix:
    """One logged-in bot account and its station room."""

    def __init__(self, cfg: MatrixConfig, kv: KeyValue, store_path: str) -> None:
        self.cfg = cfg
        self.kv = kv
        self.store_path = store_path
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
            ),
        )
        self.send_errors = 0
        self.send_failing: str | None = None  # why the last send failed, until one succeeds
        self.say: Say | None = None  # set by the daemon: posts an m.notice into the room
        self.cross_signing: dict[str, Any] = {}  # what cross_signing.ensure found (doctor shows it)
        self.station = Station(self.client, cfg, kv)
        self.trust = Trust(self.station, self._say)
        self.e2ee = E2EE(self.station, self.trust)
        self.undecryptable = Undecryptable(self.station, self.trust, self._say)
        self.refusal = Refusal(self.station)
        self.syncer = Syncer(self.station, self.e2ee, self.trust, self.undecryptable, self.refusal)
        self.syncer.on_token_revoked = self.relogin

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

    # -- session ---------------------------------------------------------
    async def restore(self) -> bool:
        """Restore the saved session (and open its crypto store); False when none is saved."""
        saved = await self.kv.get_json(SESSION_KEY)
        if not (isinstance(saved, dict) and saved.get("user_id") == self.cfg.user_id and saved.get("access_token")):
            return False
        add_secret(saved["access_token"])
        device_id = str(saved.get("device_id") or "")
        if self.encryption and not os.path.exists(self._store_file(device_id)):
            log.warning(
                "crypto_store_missing",
                device_id=device_id,
                path=self._store_file(device_id),
                hint="the device's keys are gone: encrypted rooms may fail; delete state/ to log in as a new device",
            )
        self.client.restore_login(saved["user_id"], device_id, saved["access_token"])
        self._open_crypto()
        return True

    async def login(self) -> None:
        """Restore the saved session, else use the configured token, else log in once."""
        c = self.client
        if await self.restore():
            try:
                await self._whoami("the saved session (delete state/ to log in afresh)")
            except TokenRevoked as e:
                await self.relogin(e.code)
                return
            log.info("matrix_session_restored", user_id=c.user_id, device_id=c.device_id)
            await self._save_identity()
            await self._cross_sign()
            return
        if self.cfg.access_token:
            c.access_token = self.cfg.access_token
            who = await self._whoami("matrix.access_token")
            c.restore_login(who.user_id, who.device_id or "", self.cfg.access_token)
        else:
            await self._password_login()
        await self._logged_in()

    async def relogin(self, code: str) -> None:
        """The homeserver revoked the token: log in again with the password (a new device), inbox kept."""
        if not self.cfg.password:
            raise MatrixFatal(
                f"the homeserver no longer accepts the bot's access token ({code}) and no matrix.password "
                "is configured to log in again; set one, or a new matrix.access_token and delete the saved session"
            )
        log.warning("matrix_token_revoked", code=code, action="logging in again as a new device")
        c = self.client
        c.device_id = ""  # else nio asks for the old device id, whose keys the server forgot
        c.olm, c.store = None, None  # the new device gets a crypto store of its own
        await self._password_login()
        await self._logged_in()

    async def _password_login(self) -> None:
        c = self.client
        r = await retry("login", lambda: c.login(self.cfg.password or "", device_name=self.cfg.device_name))
        if not isinstance(r, LoginResponse):
            raise MatrixFatal(f"matrix.password: login as {self.cfg.user_id} failed: {getattr(r, 'message', r)}")

    async def _logged_in(self) -> None:
        """Open the new device's crypto store and save the session."""
        c = self.client
        self._open_crypto()
        add_secret(c.access_token)
        await self.kv.set_json(
            SESSION_KEY, {"user_id": c.user_id, "device_id": c.device_id, "access_token": c.access_token}
        )
        log.info("matrix_logged_in", user_id=c.user_id, device_id=c.device_id)
        await self._save_identity()
        await self._cross_sign()

    async def _cross_sign(self) -> None:
        """Publish the bot's cross-signing identity (once) and sign this device with it (see cross_signing.py)."""
        c = self.client
        if not self.encryption or c.olm is None:
            return
        if c.should_upload_keys:  # the device keys must be on the server before they can be signed
            r = await key_upload.upload_keys(c)
            if isinstance(r, KeysUploadError) and not key_upload.is_conflict(r):
                raise MatrixFatal(
                    f"matrix: the homeserver refused the bot's device keys ({r.status_code}: {r.message})"
                )
        self.cross_signing = await cross_signing.ensure(
            cross_signing.Api(self.cfg.homeserver, c.access_token), self.user_id, c.device_id, self.store_path,
            password=self.cfg.password, recovery_key=self.cfg.recovery_key,
        )

    def _store_file(self, device_id: str) -> str:
        return os.path.join(self.store_path, f"{self.cfg.user_id}_{device_id}.db")

    def _open_crypto(self) -> None:
        """Make sure nio's crypto store is loaded for this device (restore_login usually did it)."""
        c = self.client
        if not self.encryption:
            return
        if not ENCRYPTION_ENABLED:
            raise MatrixFatal(
                "matrix.encryption: matrix-nio's e2e extra (vodozemac) is not installed; "
                "install matrix-nio[e2e] or set encryption = false"
            )
        if c.olm is None and c.user_id and c.device_id:
            c.load_store()
        if c.olm is None:
            raise MatrixFatal(f"matrix.encryption: cannot open the crypto store under {self.store_path}")
        accept_forwards_from_session_owner(c.olm)

    async def _save_identity(self) -> None:
        info = self.device_info()
        await self.kv.set_json(
            CRYPTO_KEY,
            {"device_id": info["device_id"], "ed25519": info["ed25519"], "curve25519": info["curve25519"]},
        )
        if self.encryption:
            log.info("matrix_device", device_id=info["device_id"], ed25519=info["fingerprint"])

    async def _whoami(self, source: str) -> WhoamiResponse:
        r = await retry("whoami", self.client.whoami)
        if isinstance(r, WhoamiResponse):
            if r.user_id != self.cfg.user_id:
                raise MatrixFatal(f"{source}: the token belongs to {r.user_id}, not matrix.user_id {self.cfg.user_id}")
            return r
        code = getattr(r, "status_code", "")
        why = f"{source}: the homeserver refused the access token ({code}: {getattr(r, 'message', r)})"
        raise TokenRevoked(why, code) if code in REVOKED else MatrixFatal(why)

    # -- what doctor and the metrics read ----------------------------------
    def device_info(self) -> dict[str, Any]:
        """The bot's device and its identity keys (None where unknown; no network)."""
        c = self.client
        keys: dict[str, str] = dict(c.olm.account.identity_keys) if c.olm is not None else {}
        return {
            "device_id": c.device_id or None,
            "ed25519": keys.get("ed25519"),
            "curve25519": keys.get("curve25519"),
            "fingerprint": fingerprint(keys.get("ed25519")),
            "keys_uploaded": bool(c.olm is not None and c.olm.account.shared),
        }

    @property
    def room_encrypted(self) -> bool:
        """Is the station room encrypted (as far as the syncs so far tell)?"""
        return self.station.encrypted

    def encryption_status(self) -> dict[str, Any]:
        """What ``doctor`` reports: the policy, the room's encryption and the bot's device."""
        return {
            "encryption": self.encryption,
            "trust": self.cfg.trust,
            "room_id": self.room_id or None,
            "room_encrypted": self.room_encrypted,
            "refused": self.refused,
            "undecryptable_waiting": len(self.undecryptable.waiting),
            **self.device_info(),
        }

    async def fetch_room_encrypted(self, room_id: str | None = None) -> bool | None:
        """Ask the homeserver whether the room has ``m.room.encryption`` (None: cannot tell)."""
        rid = room_id or self.room_id
        try:
            r = await self.client.room_get_state_event(rid, "m.room.encryption")
        except Exception as e:
            log.warning("room_state_failed", error=f"{type(e).__name__}: {e}")
            return None
        if isinstance(r, RoomGetStateEventResponse):
            return bool(r.content.get("algorithm"))
        return False if getattr(r, "status_code", "") == "M_NOT_FOUND" else None

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

    # -- sending -----------------------------------------------------------
    async def send(self, content: dict[str, Any], txn: str, event_type: str = "m.room.message") -> str:
        """Send into the station room with ``txn``; returns the event id or raises SendFailed.

        Into an encrypted room the event is encrypted (reactions too), for the devices the
        trust policy allows. Waits for the first sync, which tells whether the room is encrypted.
        """
        try:
            await self._wait_synced()
            if self.refused:
                raise SendFailed(
                    "the station room is encrypted and [matrix] encryption = false: the bot posts nothing there"
                )
            if self.e2ee.encrypting():
                r = await self.e2ee.send(event_type, content, txn)
            else:
                r = await self.client.room_send(self.room_id, event_type, content, tx_id=txn)
        except SendFailed as e:
            self._send_failed(str(e))
            raise
        except Exception as e:
            self._send_failed(describe(e))
            raise SendFailed(describe(e)) from None
        if isinstance(r, RoomSendResponse):
            self.send_failing = None
            return str(r.event_id)
        code = str(getattr(r, "status_code", "") or "")
        why = f"{code}: {getattr(r, 'message', r)}"
        self._send_failed(why)
        raise SendFailed(why, code)

    def _send_failed(self, why: str) -> None:
        self.send_errors += 1
        self.send_failing = why

    async def redact(self, event_id: str, txn: str, reason: str | None = None) -> None:
        """Redact one of the bot's own events in the station room (redactions are never encrypted)."""
        try:
            r = await self.client.room_redact(self.room_id, event_id, reason=reason, tx_id=txn)
        except Exception as e:
            self.send_errors += 1
            raise SendFailed(f"{type(e).__name__}: {e}") from None
        if isinstance(r, ErrorResponse):
            self.send_errors += 1
            raise SendFailed(f"{r.status_code}: {r.message}")

    async def _wait_synced(self) -> None:
        synced = self.syncer.synced
        if synced.is_set():
            return
        try:
            await asyncio.wait_for(synced.wait(), FIRST_SYNC_WAIT)
        except TimeoutError:
            raise SendFailed("no sync with the homeserver yet") from None

    def _say(self, text: str, *, reply_to: str | None = None) -> None:
        if self.say is None:
            log.info("notice_not_posted", text=text, reason="no notice sender")
            return
        self.say(text, reply_to=reply_to)

    async def close(self) -> None:
        await key_upload.finish()
        await self.client.close()
