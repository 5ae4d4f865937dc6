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
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Protocol

import structlog
from nio import (
    AsyncClient,
    AsyncClientConfig,
    BadEvent,
    EncryptionError,
    ErrorResponse,
    JoinedMembersError,
    JoinError,
    KeysUploadError,
    LocalProtocolError,
    LoginResponse,
    MegolmEvent,
    MessageDirection,
    RoomGetStateEventResponse,
    RoomMessagesResponse,
    RoomResolveAliasResponse,
    RoomSendResponse,
    SyncResponse,
    UnknownBadEvent,
    WhoamiResponse,
)
from nio.api import Api
from nio.crypto import ENCRYPTION_ENABLED

from bot.config import MatrixConfig
from bot.logs import add_secret
from bot.matrix.crypto import (
    ANSWER_TYPES,
    Waiting,
    accept_forwards_from_session_owner,
    fingerprint,
    is_targeted,
    plain_event,
)
from bot.matrix.room import RoomState

log = structlog.get_logger("matrix")

EventHandler = Callable[[dict[str, Any]], Awaitable[None]]
Say = Callable[..., None]  # Notices.post(text, *, reply_to=..., thread_root=...)

SESSION_KEY = "matrix.session"
SYNC_KEY = "matrix.next_batch"
CRYPTO_KEY = "matrix.crypto"  # {"device_id", "ed25519", "curve25519"}: for doctor, written after login
WAITING_KEY = "matrix.undecryptable"  # events kept aside until their room key arrives
REFUSAL_KEY = "matrix.refusal_told."  # + room id: the "I cannot read encrypted messages" notice went out

WAITING_KEEP = 24 * 3600.0  # how long an undecryptable event is retried before it is given up
WAITING_MAX = 500  # at most this many events are kept aside (the oldest are given up first)
UNREACHABLE_RETRY = 300.0  # a device the bot could not open an Olm session with is retried after this
FIRST_SYNC_WAIT = 60.0  # sends wait this long for the first sync (room state, encryption) before failing


class KeyValue(Protocol):
    """Where the Matrix side keeps its session and sync token."""

    async def get_json(self, k: str) -> Any: ...

    async def set_json(self, k: str, v: Any) -> None: ...


class MatrixFatal(Exception):
    """A problem only a person can fix (bad credentials, no access to the room)."""


class SendFailed(Exception):
    """A send the homeserver refused or could not take; retried by the caller."""


def txn_id(kind: str, *parts: str) -> str:
    """A deterministic transaction id, so a retried send is never posted twice."""
    h = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:40]
    return f"pb-{kind}-{h}"


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
        self.room_id = ""
        self.room = RoomState()
        self.sync_lag = 0.0
        self.last_sync_ok = 0.0
        self.send_errors = 0
        self.connected = False
        self.say: Say | None = None  # set by the daemon: posts an m.notice into the room
        self.refused = False  # encrypted room with encryption = false: nothing is posted
        self._synced = asyncio.Event()
        self._crypto_lock = asyncio.Lock()
        self._waiting: dict[str, Waiting] = {}
        self._requested: set[str] = set()  # session ids whose keys were requested in this run
        self._unreachable: dict[tuple[str, str], float] = {}
        self._pins = {(d.user_id, d.device_id): d.ed25519 for d in cfg.verified_devices}
        self._logged_mismatch: set[tuple[str, str, str]] = set()

    @property
    def user_id(self) -> str:
        return str(self.client.user_id)

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
            await self._whoami("the saved session (delete state/ to log in afresh)")
            log.info("matrix_session_restored", user_id=c.user_id, device_id=c.device_id)
            await self._save_identity()
            return
        if self.cfg.access_token:
            c.access_token = self.cfg.access_token
            who = await self._whoami("matrix.access_token")
            c.restore_login(who.user_id, who.device_id or "", self.cfg.access_token)
        else:
            r = await self._retry("login", lambda: c.login(self.cfg.password or "", device_name=self.cfg.device_name))
            if not isinstance(r, LoginResponse):
                raise MatrixFatal(f"matrix.password: login as {self.cfg.user_id} failed: {getattr(r, 'message', r)}")
        self._open_crypto()
        add_secret(c.access_token)
        await self.kv.set_json(
            SESSION_KEY, {"user_id": c.user_id, "device_id": c.device_id, "access_token": c.access_token}
        )
        log.info("matrix_logged_in", user_id=c.user_id, device_id=c.device_id)
        await self._save_identity()

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
        r = await self._retry("whoami", self.client.whoami)
        if isinstance(r, WhoamiResponse):
            if r.user_id != self.cfg.user_id:
                raise MatrixFatal(f"{source}: the token belongs to {r.user_id}, not matrix.user_id {self.cfg.user_id}")
            return r
        code = getattr(r, "status_code", "")
        raise MatrixFatal(f"{source}: the homeserver refused the access token ({code}: {getattr(r, 'message', r)})")

    async def _retry(self, what: str, call: Callable[[], Awaitable[Any]], attempts: int = 0) -> Any:
        """Call until the homeserver answers (network errors back off); ``attempts`` 0 means forever."""
        delay = 0.5
        n = 0
        while True:
            n += 1
            try:
                return await call()
            except (OSError, TimeoutError) as e:
                if attempts and n >= attempts:
                    raise
                log.warning("matrix_unreachable", during=what, error=str(e) or type(e).__name__, retry_in=delay)
            except Exception as e:  # aiohttp client errors are not OSErrors
                if type(e).__module__.startswith("aiohttp"):
                    if attempts and n >= attempts:
                        raise
                    log.warning("matrix_unreachable", during=what, error=str(e) or type(e).__name__, retry_in=delay)
                else:
                    raise
            await asyncio.sleep(delay * (0.8 + 0.4 * random.random()))
            delay = min(delay * 2, 30.0)

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
        return self.room.encrypted or self.room_id in self.client.encrypted_rooms

    def encryption_status(self) -> dict[str, Any]:
        """What ``doctor`` reports: the policy, the room's encryption and the bot's device."""
        return {
            "encryption": self.encryption,
            "trust": self.cfg.trust,
            "room_id": self.room_id or None,
            "room_encrypted": self.room_encrypted,
            "refused": self.refused,
            "undecryptable_waiting": len(self._waiting),
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
            r = await self._retry("resolve_alias", lambda: self.client.room_resolve_alias(room))
            if not isinstance(r, RoomResolveAliasResponse):
                raise MatrixFatal(f"matrix.room: cannot resolve {room}: {getattr(r, 'message', r)}")
            room = r.room_id
        self.room_id = room
        return room

    async def join_room(self) -> str:
        """Resolve the configured room and join it (accepting its invite)."""
        room = await self.resolve_room()
        r = await self._retry("join", lambda: self.client.join(room))
        if isinstance(r, JoinError):
            raise MatrixFatal(
                f"matrix.room: cannot join {room} ({r.status_code}: {r.message}); invite {self.cfg.user_id} first"
            )
        log.info("matrix_joined", room_id=room)
        return room

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
            if self._encrypting():
                r = await self._send_encrypted(event_type, content, txn)
            else:
                r = await self.client.room_send(self.room_id, event_type, content, tx_id=txn)
        except SendFailed:
            self.send_errors += 1
            raise
        except Exception as e:
            self.send_errors += 1
            raise SendFailed(f"{type(e).__name__}: {e}") from None
        if isinstance(r, RoomSendResponse):
            return str(r.event_id)
        self.send_errors += 1
        raise SendFailed(f"{getattr(r, 'status_code', '')}: {getattr(r, 'message', r)}")

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
        if self._synced.is_set():
            return
        try:
            await asyncio.wait_for(self._synced.wait(), FIRST_SYNC_WAIT)
        except TimeoutError:
            raise SendFailed("no sync with the homeserver yet") from None

    def _encrypting(self) -> bool:
        c = self.client
        if c.olm is None:
            return False
        room = c.rooms.get(self.room_id)
        return self.room_id in c.encrypted_rooms or bool(room and room.encrypted)

    async def _send_encrypted(self, event_type: str, content: dict[str, Any], txn: str) -> Any:
        """Encrypt with the room's Megolm session (shared first when needed) and send with ``txn``.

        nio's room_send leaves reactions in the clear; this path encrypts every event type
        (the relation stays in the clear too, as the spec wants) and applies the trust policy.
        """
        c = self.client
        rid = self.room_id
        async with self._crypto_lock:
            room = c.rooms.get(rid)
            if room is None:
                raise SendFailed("the station room is not synced yet")
            if not room.members_synced:
                m = await c.joined_members(rid)
                if isinstance(m, JoinedMembersError):
                    raise SendFailed(f"joined_members: {m.message}")
            if c.should_query_keys:
                await c.keys_query()
            self._apply_trust()
            if self._new_devices(room):
                c.invalidate_outbound_session(rid)
            assert c.olm is not None
            if c.olm.should_share_group_session(rid):
                # Every share goes through this lock, so a leftover mark is stale: nio leaves it
                # behind when claiming one-time keys fails, and would then refuse to share forever.
                c.sharing_session.pop(rid, None)
                await c.share_group_session(rid, ignore_unverified_devices=self.cfg.trust == "tofu")
                self._note_unreachable(room)
            etype, encrypted = c.encrypt(rid, event_type, content)
        method, path, data = Api.room_send(c.access_token, rid, etype, encrypted, txn)
        return await c._send(RoomSendResponse, method, path, data, (rid,))

    def _room_devices(self, room: Any) -> list[Any]:
        """Every active device of the room's members (joined and invited) but the bot's own."""
        c = self.client
        assert c.olm is not None
        out = []
        for user in list(room.users):
            for dev in list(c.olm.device_store.active_user_devices(user)):
                if user == c.user_id and dev.id == c.device_id:
                    continue
                out.append(dev)
        return out

    def _new_devices(self, room: Any) -> bool:
        """Has a device appeared that the current Megolm session was not shared with?

        nio keeps sharing one session until it expires, so a member's new device (or the
        member's first one after a keys query) would never get it. Then the session is
        rotated. A device without one-time keys is not retried before UNREACHABLE_RETRY.
        """
        c = self.client
        assert c.olm is not None
        sess = c.olm.outbound_group_sessions.get(self.room_id)
        if sess is None or not sess.shared:
            return False
        covered = sess.users_shared_with | sess.users_ignored
        now = time.monotonic()
        for dev in self._room_devices(room):
            key = (dev.user_id, dev.id)
            if key in covered or c.olm.is_device_blacklisted(dev):
                continue
            if now - self._unreachable.get(key, -UNREACHABLE_RETRY) < UNREACHABLE_RETRY:
                continue
            log.info("megolm_session_rotated", reason="new device", user_id=dev.user_id, device_id=dev.id)
            return True
        return False

    def _note_unreachable(self, room: Any) -> None:
        c = self.client
        assert c.olm is not None
        sess = c.olm.outbound_group_sessions.get(self.room_id)
        if sess is None:
            return
        covered = sess.users_shared_with | sess.users_ignored
        for dev in self._room_devices(room):
            key = (dev.user_id, dev.id)
            if key not in covered and not c.olm.is_device_blacklisted(dev):
                self._unreachable[key] = time.monotonic()
                log.warning("device_unreachable", user_id=dev.user_id, device_id=dev.id,
                            reason="no Olm session (no one-time keys?)")

    def _apply_trust(self) -> None:
        """Bring nio's device trust in line with ``[matrix] trust``.

        tofu: every device of a member gets the room keys (devices are pinned to the
        ed25519 key first seen by nio). verified-only: only the devices listed in
        ``verified_devices`` with a matching ed25519 key are verified; all others are
        blacklisted and get no keys.
        """
        c = self.client
        if c.olm is None:
            return
        room = c.rooms.get(self.room_id)
        if room is None or not room.encrypted:
            return
        olm = c.olm
        for dev in self._room_devices(room):
            if self.cfg.trust == "tofu":
                if olm.is_device_blacklisted(dev):
                    c.unblacklist_device(dev)
                    log.info("device_unblacklisted", user_id=dev.user_id, device_id=dev.id, reason="trust = tofu")
                continue
            pin = self._pins.get((dev.user_id, dev.id))
            if pin is not None and pin == dev.ed25519:
                if not olm.is_device_verified(dev):
                    c.verify_device(dev)
                    log.info("device_verified", user_id=dev.user_id, device_id=dev.id)
                continue
            if pin is not None and (dev.user_id, dev.id, dev.ed25519) not in self._logged_mismatch:
                self._logged_mismatch.add((dev.user_id, dev.id, dev.ed25519))
                log.error(
                    "verified_device_key_mismatch",
                    user_id=dev.user_id,
                    device_id=dev.id,
                    homeserver_key=fingerprint(dev.ed25519),
                    hint="the device's key is not the one in matrix.verified_devices; it gets no keys",
                )
            if not olm.is_device_blacklisted(dev):
                c.blacklist_device(dev)
                log.info("device_blacklisted", user_id=dev.user_id, device_id=dev.id, reason="not verified")

    # -- syncing -------------------------------------------------------------
    async def sync_forever(self, handler: EventHandler, stop: asyncio.Event) -> None:
        """Our own sync loop: long-poll, back off on errors, save next_batch after handling."""
        since = await self.kv.get_json(SYNC_KEY)
        await self._load_waiting()
        await self._housekeeping()
        first = True
        delay = 0.5
        timeout_ms = int(self.cfg.sync_timeout * 1000)
        while not stop.is_set():
            started = time.monotonic()
            try:
                r = await self.client.sync(
                    timeout=0 if first else timeout_ms, since=since, full_state=first, set_presence="offline"
                )
            except asyncio.CancelledError:
                raise
            except Exception as e:
                self.connected = False
                log.warning("sync_failed", error=f"{type(e).__name__}: {e}", retry_in=round(delay, 2))
                await _sleep_or_stop(stop, delay)
                delay = min(delay * 2, 30.0)
                continue
            if not isinstance(r, SyncResponse):
                self.connected = False
                code = getattr(r, "status_code", "")
                if code in ("M_UNKNOWN_TOKEN", "M_MISSING_TOKEN"):
                    raise MatrixFatal(f"the homeserver no longer accepts the bot's token ({code})")
                log.warning("sync_error", status=code, error=getattr(r, "message", str(r)), retry_in=round(delay, 2))
                await _sleep_or_stop(stop, delay)
                delay = min(delay * 2, 30.0)
                continue
            delay = 0.5
            self.connected = True
            self.last_sync_ok = time.time()
            await self._housekeeping()
            await self._retry_waiting(handler)
            await self._handle_batch(r, since, handler)
            await self._check_refusal()
            await self._check_waiting()
            self._synced.set()
            await self.kv.set_json(SYNC_KEY, r.next_batch)
            since = r.next_batch
            first = False
            self.sync_lag = time.monotonic() - started

    async def _housekeeping(self) -> None:
        """nio's E2EE chores after a sync: to-device messages, key upload, query and claim."""
        c = self.client
        if c.olm is None:
            return
        async with self._crypto_lock:
            try:
                if c.outgoing_to_device_messages:
                    await c.send_to_device_messages()
                if c.should_upload_keys:
                    r = await c.keys_upload()
                    if isinstance(r, KeysUploadError):
                        log.error("keys_upload_failed", error=f"{r.status_code}: {r.message}")
                if c.should_query_keys:
                    await c.keys_query()
                if c.should_claim_keys:
                    await c.keys_claim(c.get_users_for_key_claiming())
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("crypto_housekeeping_failed", error=f"{type(e).__name__}: {e}")
            self._apply_trust()

    async def _handle_batch(self, r: SyncResponse, since: str | None, handler: EventHandler) -> None:
        for rid in r.rooms.invite:
            if rid == self.room_id:
                await self._retry("join", partial(self.client.join, rid), attempts=3)
            else:
                log.info("invite_refused", room_id=rid, reason="not the station room")
                try:
                    await self.client.room_leave(rid)
                except Exception as e:
                    log.warning("invite_refuse_failed", room_id=rid, error=str(e))
        if self.room_id in r.rooms.leave:
            log.error("station_room_left", room_id=self.room_id, hint="invite the bot back into the room")
        room = r.rooms.join.get(self.room_id)
        if room is None:
            return
        for ev in room.state:
            self.room.apply(ev.source)
        events: list[Any] = list(room.timeline.events)
        if room.timeline.limited and since and room.timeline.prev_batch:
            older = await self._backfill(room.timeline.prev_batch, since)
            log.info("timeline_backfilled", events=len(older))
            events = older + events
        for ev in events:
            source = getattr(ev, "source", None)
            if not isinstance(source, dict):
                continue
            self.room.apply(source)
            if isinstance(ev, MegolmEvent):
                await self._keep_aside(ev, initial=since is None)
                continue
            if source.get("type") == "m.room.redaction":
                self._forget_redacted(source)
            plain = await self._admit(ev)
            if plain is not None:
                await self._deliver(handler, plain)

    async def _deliver(self, handler: EventHandler, source: dict[str, Any]) -> None:
        try:
            await handler(source)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("event_handler_failed", event_id=source.get("event_id"))

    async def _admit(self, ev: Any, wrapper: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """The event as the handler sees it (plaintext-shaped), or None when the trust policy refuses it."""
        source: dict[str, Any] = ev.source
        decrypted = bool(getattr(ev, "decrypted", False))
        if decrypted:
            source = plain_event(source, wrapper)
        if self.cfg.trust != "verified-only" or self.client.olm is None:
            return source
        if source.get("type") not in ANSWER_TYPES or source.get("sender") == self.user_id:
            return source
        device = self._verified_device(ev) if decrypted else None
        if device is not None:
            return source
        await self._tell_unverified(source, ev)
        return None

    def _verified_device(self, ev: Any) -> str | None:
        """The sending device's id when it is one of ``verified_devices`` and the session is its own."""
        olm = self.client.olm
        sender, sender_key, session_id = ev.sender, getattr(ev, "sender_key", None), getattr(ev, "session_id", None)
        if olm is None or not sender_key or not session_id:
            return None
        session = olm.inbound_group_store.get(self.room_id, sender_key, session_id)
        if session is None or session.forwarding_chain:
            return None
        dev = olm.device_store.device_from_sender_key(sender, sender_key)
        if dev is None or self._pins.get((sender, dev.id)) != dev.ed25519 or session.ed25519 != dev.ed25519:
            return None
        return str(dev.id)

    async def _tell_unverified(self, source: dict[str, Any], ev: Any) -> None:
        sender = str(source.get("sender", ""))
        device = str(getattr(ev, "device_id", None) or source.get("content", {}).get("device_id") or "")
        if not device and isinstance(getattr(ev, "sender_key", None), str) and self.client.olm is not None:
            dev = self.client.olm.device_store.device_from_sender_key(sender, ev.sender_key)
            device = dev.id if dev is not None else ""
        log.warning(
            "event_from_unverified_device",
            event_id=source.get("event_id"),
            sender=sender,
            device_id=device or None,
            encrypted=bool(getattr(ev, "decrypted", False)),
        )
        key = f"matrix.told_unverified.{sender}.{device}"
        if await self.kv.get_json(key):
            return
        await self.kv.set_json(key, True)
        where = f"your device {device}" if device else "this unencrypted message's device"
        self._say(
            f"{sender}: this bot only takes messages from verified devices (trust = verified-only), and "
            f"{where} is not one of them, so your message changed nothing. Answer from a verified device, "
            "or ask the operator to add it to matrix.verified_devices.",
            reply_to=str(source.get("event_id") or "") or None,
        )

    def _say(self, text: str, *, reply_to: str | None = None) -> None:
        if self.say is None:
            log.info("notice_not_posted", text=text, reason="no notice sender")
            return
        self.say(text, reply_to=reply_to)

    async def _backfill(self, start: str, until: str) -> list[Any]:
        """Events between ``until`` (our last sync) and ``start`` (the gap's end), oldest first."""
        out: list[Any] = []
        token = start
        for _ in range(200):  # at most 20,000 events back
            r = await self._retry(
                "backfill",
                partial(
                    self.client.room_messages,
                    self.room_id, start=token, end=until, direction=MessageDirection.back, limit=100,
                ),
                attempts=5,
            )
            if not isinstance(r, RoomMessagesResponse):
                log.warning("backfill_failed", error=getattr(r, "message", str(r)))
                break
            out.extend(r.chunk)
            if not r.chunk or not r.end or r.end == token:
                break
            token = r.end
        out.reverse()
        return out

    # -- events that cannot be decrypted yet ---------------------------------
    async def _keep_aside(self, ev: MegolmEvent, *, initial: bool) -> None:
        """Keep an undecryptable event until its key arrives, and ask for the key."""
        if self.client.olm is None:
            return  # encryption = false: the refusal notice covers it
        if ev.sender == self.user_id:
            return  # the bot's own events are never answers
        if initial:
            log.info("undecryptable_history_skipped", event_id=ev.event_id, sender=ev.sender)
            return
        if ev.event_id in self._waiting:
            return
        self._waiting[ev.event_id] = Waiting(source=dict(ev.source), since=time.time())
        log.info(
            "event_undecryptable",
            event_id=ev.event_id,
            sender=ev.sender,
            device_id=ev.device_id,
            session_id=ev.session_id,
        )
        while len(self._waiting) > WAITING_MAX:
            oldest = min(self._waiting.values(), key=lambda w: w.since)
            del self._waiting[oldest.event_id]
            log.warning("undecryptable_given_up", event_id=oldest.event_id, sender=oldest.sender, reason="too many")
        await self._save_waiting()
        await self._request_key(ev)

    async def _request_key(self, ev: MegolmEvent) -> None:
        """Ask the bot's other devices (nio) and the sender's device for the event's room key."""
        c = self.client
        if ev.session_id in self._requested:
            return
        self._requested.add(ev.session_id)
        ev.room_id = self.room_id
        try:
            try:
                await c.request_room_key(ev)  # registers the request, so a forwarded key is taken
            except LocalProtocolError:
                pass  # already requested (in an earlier run)
            if ev.device_id:
                msg = ev.as_key_request(ev.sender, c.device_id or "", ev.session_id, ev.device_id)
                await c.to_device(msg)
            log.info("room_key_requested", session_id=ev.session_id, sender=ev.sender, device_id=ev.device_id)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.warning("room_key_request_failed", session_id=ev.session_id, error=f"{type(e).__name__}: {e}")

    async def _retry_waiting(self, handler: EventHandler) -> None:
        """Decrypt what the keys that arrived since allow, and hand it over (oldest first)."""
        c = self.client
        if not self._waiting or c.olm is None:
            return
        changed = False
        for w in sorted(self._waiting.values(), key=lambda w: w.since):
            ev = MegolmEvent.from_dict(w.source)
            if not isinstance(ev, MegolmEvent):
                del self._waiting[w.event_id]
                changed = True
                continue
            ev.room_id = self.room_id
            if c.olm.inbound_group_store.get(self.room_id, ev.sender_key, ev.session_id) is None:
                continue  # its key has not arrived (asking nio would only log that again)
            try:
                dec = c.decrypt_event(ev)
            except EncryptionError:
                continue
            del self._waiting[w.event_id]
            changed = True
            if isinstance(dec, BadEvent | UnknownBadEvent) or not isinstance(getattr(dec, "source", None), dict):
                log.warning("undecryptable_malformed", event_id=w.event_id, sender=w.sender)
                continue
            plain = await self._admit(dec, wrapper=w.source)
            if plain is None:
                continue
            if w.told and not is_targeted(plain):
                log.info(
                    "late_decryption_ignored",
                    event_id=w.event_id,
                    sender=w.sender,
                    reason="a plain message decrypted after its sender was asked to resend",
                )
                continue
            log.info("event_decrypted_late", event_id=w.event_id, sender=w.sender, waited=round(time.time() - w.since))
            await self._deliver(handler, plain)
        if changed:
            await self._save_waiting()

    async def _check_waiting(self) -> None:
        """Ask, once per Megolm session, the sender of an event still undecryptable to resend it."""
        if not self._waiting:
            return
        now = time.time()
        changed = False
        told_sessions = {(w.sender, w.session_id) for w in self._waiting.values() if w.told}
        for w in sorted(self._waiting.values(), key=lambda w: w.since):
            if now - w.since > WAITING_KEEP:
                del self._waiting[w.event_id]
                changed = True
                log.warning("undecryptable_given_up", event_id=w.event_id, sender=w.sender, reason="too old")
                continue
            if w.told or now - w.since < self.cfg.undecryptable_wait:
                continue
            w.told = True
            changed = True
            log.warning(
                "undecryptable_resend_asked", event_id=w.event_id, sender=w.sender, session_id=w.session_id
            )
            if (w.sender, w.session_id) in told_sessions:
                continue
            told_sessions.add((w.sender, w.session_id))
            self._say(
                f"{w.sender}: I cannot decrypt your message (its room key has not reached my device "
                f"{self.client.device_id}), so it changed nothing. Please send it again.",
                reply_to=w.event_id,
            )
        if changed:
            await self._save_waiting()

    def _forget_redacted(self, source: dict[str, Any]) -> None:
        redacts = source.get("redacts")
        if not isinstance(redacts, str):
            c = source.get("content")
            redacts = c.get("redacts") if isinstance(c, dict) else None
        if isinstance(redacts, str) and self._waiting.pop(redacts, None) is not None:
            log.info("undecryptable_redacted", event_id=redacts)

    async def _load_waiting(self) -> None:
        saved = await self.kv.get_json(WAITING_KEY)
        for d in saved if isinstance(saved, list) else []:
            w = Waiting.from_json(d)
            if w is not None:
                self._waiting[w.event_id] = w
        if self._waiting:
            log.info("undecryptable_restored", events=len(self._waiting))

    async def _save_waiting(self) -> None:
        await self.kv.set_json(WAITING_KEY, [w.to_json() for w in self._waiting.values()])

    # -- encryption = false in an encrypted room ------------------------------
    async def _check_refusal(self) -> None:
        """With encryption off, an encrypted station room is refused: logged, said once, nothing posted."""
        if self.encryption or not self.room_encrypted:
            return
        if not self.refused:
            self.refused = True
            log.error(
                "station_room_encrypted_refused",
                room_id=self.room_id,
                reason="the room is encrypted and [matrix] encryption = false",
                hint="set [matrix] encryption = true (the default), or use an unencrypted room; "
                "until then nothing is posted and requests are answered through the API only",
            )
        told_key = REFUSAL_KEY + self.room_id
        if await self.kv.get_json(told_key):
            return
        content = {
            "msgtype": "m.notice",
            "body": (
                "I cannot read encrypted messages: this room is encrypted and my configuration has "
                "encryption turned off ([matrix] encryption = false). I will not post permission prompts "
                "here. Ask my operator to turn encryption on or to move me to an unencrypted room."
            ),
        }
        try:
            r = await self.client.room_send(
                self.room_id, "m.room.message", content, tx_id=txn_id("refuse", self.room_id)
            )
        except Exception as e:
            log.warning("refusal_notice_failed", error=f"{type(e).__name__}: {e}")
            return
        if isinstance(r, RoomSendResponse):
            await self.kv.set_json(told_key, True)
        else:
            log.warning("refusal_notice_failed", error=f"{getattr(r, 'status_code', '')}: {getattr(r, 'message', r)}")

    async def close(self) -> None:
        await self.client.close()


async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), seconds * (0.8 + 0.4 * random.random()))
    except TimeoutError:
        pass
