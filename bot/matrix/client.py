"""The Matrix side: log in or restore, join the station room, sync, send.

Knows nothing of ACP. It reads and writes its own durable bits (session, sync
token) through a small key/value store, and hands every station-room event,
in order, to one handler. ``next_batch`` is saved only after its batch is handled.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Protocol

import structlog
from nio import (
    AsyncClient,
    AsyncClientConfig,
    ErrorResponse,
    JoinError,
    LoginResponse,
    MessageDirection,
    RoomMessagesResponse,
    RoomResolveAliasResponse,
    RoomSendResponse,
    SyncResponse,
    WhoamiResponse,
)

from bot.config import MatrixConfig
from bot.logs import add_secret
from bot.matrix.room import RoomState

log = structlog.get_logger("matrix")

EventHandler = Callable[[dict[str, Any]], Awaitable[None]]

SESSION_KEY = "matrix.session"
SYNC_KEY = "matrix.next_batch"


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
        self.client = AsyncClient(
            cfg.homeserver,
            cfg.user_id,
            store_path=store_path,
            config=AsyncClientConfig(max_timeouts=1, max_limit_exceeded=3, request_timeout=60),
        )
        self.room_id = ""
        self.room = RoomState()
        self.sync_lag = 0.0
        self.last_sync_ok = 0.0
        self.send_errors = 0
        self.connected = False

    @property
    def user_id(self) -> str:
        return str(self.client.user_id)

    # -- session ---------------------------------------------------------
    async def login(self) -> None:
        """Restore the saved session, else use the configured token, else log in once."""
        saved = await self.kv.get_json(SESSION_KEY)
        c = self.client
        if isinstance(saved, dict) and saved.get("user_id") == self.cfg.user_id and saved.get("access_token"):
            add_secret(saved["access_token"])
            c.restore_login(saved["user_id"], saved["device_id"], saved["access_token"])
            await self._whoami("the saved session (delete state/ to log in afresh)")
            log.info("matrix_session_restored", user_id=c.user_id, device_id=c.device_id)
            return
        if self.cfg.access_token:
            c.access_token = self.cfg.access_token
            who = await self._whoami("matrix.access_token")
            c.restore_login(who.user_id, who.device_id or "", self.cfg.access_token)
        else:
            r = await self._retry("login", lambda: c.login(self.cfg.password or "", device_name=self.cfg.device_name))
            if not isinstance(r, LoginResponse):
                raise MatrixFatal(f"matrix.password: login as {self.cfg.user_id} failed: {getattr(r, 'message', r)}")
        add_secret(c.access_token)
        await self.kv.set_json(
            SESSION_KEY, {"user_id": c.user_id, "device_id": c.device_id, "access_token": c.access_token}
        )
        log.info("matrix_logged_in", user_id=c.user_id, device_id=c.device_id)

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

    # -- the station room --------------------------------------------------
    async def join_room(self) -> str:
        """Resolve the configured room and join it (accepting its invite)."""
        room = self.cfg.room
        if room.startswith("#"):
            r = await self._retry("resolve_alias", lambda: self.client.room_resolve_alias(room))
            if not isinstance(r, RoomResolveAliasResponse):
                raise MatrixFatal(f"matrix.room: cannot resolve {room}: {getattr(r, 'message', r)}")
            room = r.room_id
        self.room_id = room
        r = await self._retry("join", lambda: self.client.join(room))
        if isinstance(r, JoinError):
            raise MatrixFatal(
                f"matrix.room: cannot join {room} ({r.status_code}: {r.message}); invite {self.cfg.user_id} first"
            )
        log.info("matrix_joined", room_id=room)
        return room

    # -- sending -----------------------------------------------------------
    async def send(self, content: dict[str, Any], txn: str, event_type: str = "m.room.message") -> str:
        """Send into the station room with ``txn``; returns the event id or raises SendFailed."""
        try:
            r = await self.client.room_send(self.room_id, event_type, content, tx_id=txn)
        except Exception as e:
            self.send_errors += 1
            raise SendFailed(f"{type(e).__name__}: {e}") from None
        if isinstance(r, RoomSendResponse):
            return str(r.event_id)
        self.send_errors += 1
        raise SendFailed(f"{getattr(r, 'status_code', '')}: {getattr(r, 'message', r)}")

    async def redact(self, event_id: str, txn: str, reason: str | None = None) -> None:
        """Redact one of the bot's own events in the station room."""
        try:
            r = await self.client.room_redact(self.room_id, event_id, reason=reason, tx_id=txn)
        except Exception as e:
            self.send_errors += 1
            raise SendFailed(f"{type(e).__name__}: {e}") from None
        if isinstance(r, ErrorResponse):
            self.send_errors += 1
            raise SendFailed(f"{r.status_code}: {r.message}")

    # -- syncing -------------------------------------------------------------
    async def sync_forever(self, handler: EventHandler, stop: asyncio.Event) -> None:
        """Our own sync loop: long-poll, back off on errors, save next_batch after handling."""
        since = await self.kv.get_json(SYNC_KEY)
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
            await self._handle_batch(r, since, handler)
            await self.kv.set_json(SYNC_KEY, r.next_batch)
            since = r.next_batch
            first = False
            self.sync_lag = time.monotonic() - started

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
        events = [ev.source for ev in room.timeline.events]
        if room.timeline.limited and since and room.timeline.prev_batch:
            older = await self._backfill(room.timeline.prev_batch, since)
            log.info("timeline_backfilled", events=len(older))
            events = older + events
        for source in events:
            if not isinstance(source, dict):
                continue
            self.room.apply(source)
            try:
                await handler(source)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("event_handler_failed", event_id=source.get("event_id"))

    async def _backfill(self, start: str, until: str) -> list[dict[str, Any]]:
        """Events between ``until`` (our last sync) and ``start`` (the gap's end), oldest first."""
        out: list[dict[str, Any]] = []
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
            out.extend(ev.source for ev in r.chunk)
            if not r.chunk or not r.end or r.end == token:
                break
            token = r.end
        out.reverse()
        return out

    async def close(self) -> None:
        await self.client.close()


async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), seconds * (0.8 + 0.4 * random.random()))
    except TimeoutError:
        pass
