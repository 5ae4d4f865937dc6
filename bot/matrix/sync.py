"""The sync loop: long-poll, back off on errors, hand the station room's events over in order.

``next_batch`` is saved only after its batch is handled. Invites to other rooms are
refused; a limited timeline is backfilled; encrypted events that cannot be decrypted
yet go to the undecryptable queue.
"""

from __future__ import annotations

import asyncio
import random
import time
from functools import partial
from typing import Any

import structlog
from nio import MegolmEvent, MessageDirection, RoomMessagesResponse, SyncResponse

from bot.aio import sleep_unless_stopped
from bot.matrix.e2ee import E2EE
from bot.matrix.errors import MatrixFatal
from bot.matrix.refusal import Refusal
from bot.matrix.retry import retry
from bot.matrix.station import EventHandler, Station
from bot.matrix.trust import Trust
from bot.matrix.undecryptable import Undecryptable

log = structlog.get_logger("matrix")

SYNC_KEY = "matrix.next_batch"


class Syncer:
    """Our own sync loop, and what it tells: connected, the last good sync, the lag, the first sync."""

    def __init__(
        self, st: Station, e2ee: E2EE, trust: Trust, undecryptable: Undecryptable, refusal: Refusal
    ) -> None:
        self.st = st
        self.e2ee = e2ee
        self.trust = trust
        self.undecryptable = undecryptable
        self.refusal = refusal
        self.sync_lag = 0.0
        self.last_sync_ok = 0.0
        self.connected = False
        self.synced = asyncio.Event()  # set after the first sync is handled

    async def run(self, handler: EventHandler, stop: asyncio.Event) -> None:
        """Long-poll, back off on errors, save next_batch after handling."""
        since = await self.st.kv.get_json(SYNC_KEY)
        await self.undecryptable.load()
        await self.e2ee.housekeeping()
        first = True
        delay = 0.5
        timeout_ms = int(self.st.cfg.sync_timeout * 1000)
        deliver = partial(self._deliver, handler)
        while not stop.is_set():
            started = time.monotonic()
            try:
                r = await self.st.client.sync(
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
            await self.e2ee.housekeeping()
            await self.undecryptable.retry(deliver)
            await self._handle_batch(r, since, deliver)
            await self.refusal.check()
            await self.undecryptable.check()
            self.synced.set()
            await self.st.kv.set_json(SYNC_KEY, r.next_batch)
            since = r.next_batch
            first = False
            self.sync_lag = time.monotonic() - started

    async def _handle_batch(self, r: SyncResponse, since: str | None, deliver: EventHandler) -> None:
        st = self.st
        for rid in r.rooms.invite:
            if rid == st.room_id:
                await retry("join", partial(st.client.join, rid), attempts=3)
            else:
                log.info("invite_refused", room_id=rid, reason="not the station room")
                try:
                    await st.client.room_leave(rid)
                except Exception as e:
                    log.warning("invite_refuse_failed", room_id=rid, error=str(e))
        if st.room_id in r.rooms.leave:
            log.error("station_room_left", room_id=st.room_id, hint="invite the bot back into the room")
        room = r.rooms.join.get(st.room_id)
        if room is None:
            return
        for ev in room.state:
            st.room.apply(ev.source)
        events: list[Any] = list(room.timeline.events)
        if room.timeline.limited and since and room.timeline.prev_batch:
            older = await self._backfill(room.timeline.prev_batch, since)
            log.info("timeline_backfilled", events=len(older))
            events = older + events
        for ev in events:
            source = getattr(ev, "source", None)
            if not isinstance(source, dict):
                continue
            st.room.apply(source)
            if isinstance(ev, MegolmEvent):
                await self.undecryptable.keep_aside(ev, initial=since is None)
                continue
            if source.get("type") == "m.room.redaction":
                self.undecryptable.forget_redacted(source)
            plain = await self.trust.admit(ev)
            if plain is not None:
                await deliver(plain)

    async def _deliver(self, handler: EventHandler, source: dict[str, Any]) -> None:
        try:
            await handler(source)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("event_handler_failed", event_id=source.get("event_id"))

    async def _backfill(self, start: str, until: str) -> list[Any]:
        """Events between ``until`` (our last sync) and ``start`` (the gap's end), oldest first."""
        out: list[Any] = []
        token = start
        for _ in range(200):  # at most 20,000 events back
            r = await retry(
                "backfill",
                partial(
                    self.st.client.room_messages,
                    self.st.room_id, start=token, end=until, direction=MessageDirection.back, limit=100,
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


async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    await sleep_unless_stopped(stop, seconds * (0.8 + 0.4 * random.random()))
