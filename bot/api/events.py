"""``GET /events``: server-sent inbox events with ids, resumed from ``Last-Event-ID`` (aiohttp-sse).

Every event gets an id ``EPOCH-N`` (EPOCH is new each daemon start, N counts from 1). The last
``RING`` events stay in memory; a client that reconnects with ``Last-Event-ID`` gets every kept event
after it, then the live stream. When its id is older than the oldest kept event, from an earlier
daemon run, or unreadable (anything but this run's ``EPOCH-`` and ASCII digits), it first gets
``event: events-missed`` (data ``{"last_event_id": ...}``) and then every kept event: it should
re-read ``GET /permissions`` (the inbox stays the truth). A client too slow to keep up falls behind
the ring the same way. A keep-alive comment every 15 s.

A stream tells only the requests of its caller's rooms (:func:`bot.api.common.reach`); the event ids
count every room's events, so a gap in them says nothing about another room.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections import deque
from typing import TYPE_CHECKING

from aiohttp import web
from aiohttp_sse import EventSourceResponse

from bot.events.states import Change
from bot.inbox.record import Record
from bot.util.aio import sleep_unless_stopped

if TYPE_CHECKING:
    from bot.api.common import Reach

RING = 1000
PING = 15.0
_SEQ = re.compile("[0-9]{1,18}")  # ASCII digits only (str.isdigit takes "²", which int() refuses), bounded


class EventLog:
    """The bounded ring of recent events (an inbox listener), and the wake-up for streams waiting on it."""

    def __init__(self, size: int = RING) -> None:
        self.epoch = uuid.uuid4().hex[:12]
        self.ring: deque[tuple[int, str, str, str]] = deque(maxlen=size)  # (n, event, data, room)
        self.last = 0
        self.tick = asyncio.Event()

    def on_change(self, kind: str, rec: Record) -> None:
        self.last += 1
        self.ring.append((self.last, Change(kind).event, json.dumps(rec.to_api(), separators=(",", ":")), rec.room))
        self.tick.set()
        self.tick = asyncio.Event()  # the set one wakes those already waiting; new waits take this one

    def event_id(self, n: int) -> str:
        return f"{self.epoch}-{n}"

    def resume(self, last_event_id: str | None) -> tuple[int, bool]:
        """(the number to stream after, whether events were missed) for a client's ``Last-Event-ID``."""
        if last_event_id is None:
            return self.last, False
        epoch, _, n = last_event_id.strip().partition("-")
        if epoch == self.epoch and _SEQ.fullmatch(n) and int(n) <= self.last:
            return int(n), False
        return 0, True

    def after(self, n: int) -> tuple[list[tuple[int, str, str, str]], bool]:
        """Kept events after number ``n``, and whether some after it are no longer kept."""
        first = self.ring[0][0] if self.ring else self.last + 1
        return [e for e in self.ring if e[0] > n], n + 1 < first


EVENTS: web.AppKey[EventLog] = web.AppKey("events")


async def stream(request: web.Request, reach: Reach) -> web.StreamResponse:
    """The stream of the events of the rooms ``reach`` sees."""
    log = request.app[EVENTS]
    resp = EventSourceResponse(sep="\n", ping_interval=PING)
    await resp.prepare(request)
    async with resp:
        try:
            await resp.write(b": connected\n\n")
            last, missed = log.resume(resp.last_event_id)
            while resp.is_connected():
                tick = log.tick
                kept, gone = log.after(last)
                if missed or gone:
                    await resp.send(json.dumps({"last_event_id": resp.last_event_id if missed else
                                                log.event_id(last)}), event="events-missed")
                    missed = False
                for n, name, data, room in kept:
                    if reach.sees(room):
                        await resp.send(data, id=log.event_id(n), event=name)
                    last = n
                if not kept:
                    await sleep_unless_stopped(tick, PING)
        except (ConnectionResetError, TimeoutError):  # gone, or stalled past the send timeout
            pass
    return resp
