"""The sync loop: long-poll, back off on errors, hand the station room's events over in order.

``next_batch`` is saved only after its batch is handled. Syncs use the station-room filter
(sync_filter.py). Each station room (station_room.py) is handled in turn, its events to its own handler.
Invites to a station room are accepted, to other rooms refused; a limited timeline is backfilled
(backfill.py); encrypted events that cannot be decrypted
yet go to the undecryptable queue (the handler sees them first, still encrypted, so it
can keep their place in the timeline for when they are decrypted).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import structlog
from nio import MegolmEvent, SyncResponse

from bot.inbox.db.errors import DATABASE_ERRORS
from bot.inbox.db.fence import Deposed
from bot.matrix.backfill import backfill
from bot.matrix.errors import REVOKED, MatrixFatal
from bot.matrix.retry import STORAGE_ERRORS, UNREACHABLE_HINT, MatrixBackoff, describe, retry
from bot.matrix.station import EventHandler, Station
from bot.matrix.station_room import StationRoom
from bot.matrix.sync_filter import SyncFilter
from bot.matrix.vault import Vault
from bot.util.aio import sleep_unless_stopped
from bot.util.backoff import Backoff
from bot.util.outage import Outage

log = structlog.get_logger("matrix")

SYNC_KEY = "matrix.next_batch"
# The pace of retries while the state cannot be written (its database restarting or failing over):
# capped low, so the room's answers are settled within seconds of its return.
STATE_PACE = (0.5, 3.0)


async def _no_relogin(code: str) -> None:
    raise MatrixFatal(f"the homeserver no longer accepts the bot's token ({code})")


class Syncer:
    """Our own sync loop, and what it tells: connected, the last good sync, the lag, the first sync."""

    def __init__(
        self, st: Station, rooms: list[StationRoom],
        *, sync_filter: SyncFilter | None = None,
        on_token_revoked: Callable[[str], Awaitable[None]] = _no_relogin, vault: Vault | None = None,
    ) -> None:
        """``st``: the client, store and config every room shares; ``rooms``: the station rooms, each
        with its ``handler`` (else ``run``'s) for its events; ``vault`` (PostgreSQL): the device, saved
        with the sync token whenever it changed."""
        self.st = st
        self.rooms = rooms
        self.sync_lag = 0.0
        self.last_sync_ok = 0.0
        self.connected = False
        self.synced = asyncio.Event()  # set after the first sync is handled
        self.filter = sync_filter  # None: sync everything
        # the token was revoked: log in again (MatrixFatal when no password is configured)
        self.on_token_revoked = on_token_revoked
        self.vault = vault
        self.state_outage = Outage(log, "sync_state_unavailable", "sync_state_back")  # the state away: 2 lines
        self.link_outage = Outage(log, "sync_failed", "sync_back", hint=UNREACHABLE_HINT)  # the homeserver away: 2

    @property
    def joined(self) -> bool:
        """Is the bot in every station room? (False after it left or was removed from one.)"""
        return all(r.joined for r in self.rooms)

    async def run(self, handler: EventHandler, stop: asyncio.Event) -> None:
        """Long-poll until ``stop``; a batch that fails is fetched and handled again after a back-off.
        ``handler`` takes the events of every room without a handler of its own."""
        since = await self.st.kv.get_json(SYNC_KEY)
        for room in self.rooms:
            await room.undecryptable.load()
        first = True
        backoff = MatrixBackoff()
        state_lost = Backoff(*STATE_PACE)
        timeout_ms = int(self.st.cfg.sync_timeout * 1000)
        delivers = [(room, partial(self._deliver, room.handler or handler)) for room in self.rooms]
        while not stop.is_set():
            started = time.monotonic()
            try:
                r = await self.st.client.sync(
                    timeout=0 if first else timeout_ms, since=since, full_state=first, set_presence="offline",
                    sync_filter=await self.filter.get() if self.filter else None,
                )
            except Exception as e:
                self.connected = False
                await self._pause(stop, backoff, "sync_failed", self.link_outage, error=describe(e))
                continue
            if not isinstance(r, SyncResponse):
                self.connected = False
                code = getattr(r, "status_code", "")
                if code in REVOKED:
                    await self.on_token_revoked(code)  # logs in again, or raises MatrixFatal
                    continue
                if self.filter:
                    await self.filter.refused(code)  # an unknown filter id: made again on the next try
                why = f"{code} {getattr(r, 'message', str(r))}".strip()
                await self._pause(stop, backoff, "sync_error", self.link_outage, error=why)
                continue
            self.connected = True
            self.link_outage.ok()
            try:
                await self._invites(r)
                for room, deliver in delivers:
                    await room.e2ee.housekeeping()
                    await room.undecryptable.retry(deliver)
                    await self._handle_batch(room, r, since, deliver)
                    await room.refusal.check()
                    await room.undecryptable.check()
            except (asyncio.CancelledError, MatrixFatal, Deposed):  # Deposed: the term is over, the sync ends
                raise
            except DATABASE_ERRORS as e:  # the state away: the same batch again soon after it is back
                await self._pause(
                    stop, state_lost, "sync_batch_state_unavailable", self.state_outage, error=describe(e)
                )
                continue
            except Exception as e:  # the same batch comes again: since is not moved
                await self._pause(stop, backoff, "sync_batch_failed", error=describe(e))
                continue
            if not await self._save_token(r.next_batch, stop):
                return
            backoff.reset()
            state_lost.reset()
            self.state_outage.ok()
            self.last_sync_ok = time.time()
            self.synced.set()
            since, first = r.next_batch, False
            self.sync_lag = time.monotonic() - started

    async def _pause(
        self, stop: asyncio.Event, backoff: Backoff, event: str, outage: Outage | None = None, **kw: Any
    ) -> None:
        """Wait before the next try; with ``outage`` (the state away), only its first try is a warning."""
        delay = backoff.delay()
        if outage is not None:
            outage.failed(str(kw.pop("error", "")), delay, event=event)
        else:
            log.warning(event, retry_in=round(delay, 2), **kw)
        await sleep_unless_stopped(stop, delay)

    async def _save_token(self, token: str, stop: asyncio.Event) -> bool:
        """Save next_batch, retrying a failing disk until it takes it; False when stopped first. With a
        vault, a changed device goes in the same (fenced) transaction: a new leader resumes at a token whose
        to-device messages its Olm state has seen."""
        backoff = Backoff(*STATE_PACE)
        while True:
            try:
                if self.vault is None:
                    await self.st.kv.set_json(SYNC_KEY, token)
                else:
                    await self.vault.write({SYNC_KEY: token})
                return True
            except STORAGE_ERRORS as e:
                if stop.is_set():
                    return False
                await self._pause(stop, backoff, "sync_token_save_failed", self.state_outage, error=describe(e))

    async def _invites(self, r: SyncResponse) -> None:
        """An invite to a station room is accepted (after a kick, say); to any other room, declined."""
        client = self.st.client
        ours = {room.room_id: room.name for room in self.rooms}
        for rid in r.rooms.invite:
            if rid in ours:
                log.info("invite_accepted", room_id=rid, room=ours[rid])
                await retry("join", partial(client.join, rid), attempts=3)
            else:
                log.info("invite_refused", room_id=rid, reason="not a station room")
                try:
                    await client.room_leave(rid)
                except Exception as e:
                    log.warning("invite_refuse_failed", room_id=rid, error=str(e))

    async def _handle_batch(
        self, station: StationRoom, r: SyncResponse, since: str | None, deliver: EventHandler
    ) -> None:
        st = station.station
        if st.room_id in r.rooms.leave:
            station.joined = False
            log.error("station_room_left", room_id=st.room_id, room=station.name,
                      hint="invite the bot back into the room")
        room = r.rooms.join.get(st.room_id)
        if room is None:
            return
        station.joined = True
        for ev in room.state:
            st.room.apply(ev.source)
        events: list[Any] = list(room.timeline.events)
        if room.timeline.limited and since and room.timeline.prev_batch:
            older = await backfill(st, room.timeline.prev_batch, since)
            log.info("timeline_backfilled", events=len(older))
            events = older + events
        for ev in events:
            if not isinstance(source := getattr(ev, "source", None), dict):
                continue
            st.room.apply(source)
            if isinstance(ev, MegolmEvent):
                await deliver(source)  # still encrypted: the handler keeps its place in the timeline
                await station.undecryptable.keep_aside(ev, initial=since is None)
                continue
            if source.get("type") == "m.room.redaction":
                station.undecryptable.forget_redacted(source)
            plain = await station.trust.admit(ev)
            if plain is not None:
                await deliver(plain)

    async def _deliver(self, handler: EventHandler, source: dict[str, Any]) -> None:
        """A bad event is logged and skipped; a failing disk fails the batch (it comes again)."""
        try:
            await handler(source)
        except (asyncio.CancelledError, Deposed):
            raise
        except STORAGE_ERRORS:
            raise
        except Exception:
            log.exception("event_handler_failed", event_id=source.get("event_id"))
