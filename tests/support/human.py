"""A person in the station room: a plain matrix-nio client that records the room's timeline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from nio import AsyncClient, MessageDirection, RoomMessagesResponse, SyncResponse

from bot.demo.homeserver import Homeserver

Pred = Callable[[dict[str, Any]], bool]


def content(ev: dict[str, Any]) -> dict[str, Any]:
    c = ev.get("content")
    return c if isinstance(c, dict) else {}


def rel(ev: dict[str, Any]) -> dict[str, Any]:
    r = content(ev).get("m.relates_to")
    return r if isinstance(r, dict) else {}


class Human:
    """Registers on ``hs`` and follows one room."""

    def __init__(self, hs: Homeserver, localpart: str) -> None:
        self.localpart = localpart
        self.password = f"pw-{localpart}-secret"
        r = hs.register(localpart, self.password)
        self.user_id: str = r["user_id"]
        self.token: str = r["access_token"]
        self.client = AsyncClient(hs.url, self.user_id, device_id=r["device_id"])
        self.client.access_token = self.token
        self.client.user_id = self.user_id
        self._events: list[dict[str, Any]] = []
        self.room_id = ""
        self._task: asyncio.Task[None] | None = None
        self._since: str | None = None

    @property
    def events(self) -> list[dict[str, Any]]:
        """The room's events since :meth:`start`, as this person's client received them."""
        if self._task is None and self._since is not None:
            raise AssertionError(f"{self.localpart} does not follow the room yet: await follow() first")
        return self._events

    @events.setter
    def events(self, value: list[dict[str, Any]]) -> None:
        self._events = value

    async def start(self, room_id: str, follow: bool = True) -> None:
        """Join the room's timeline from now; ``follow=False``: sync nothing until :meth:`follow` (a person
        nobody watches costs the homeserver a sync response for every event otherwise)."""
        self.room_id = room_id
        r = await self.client.sync(timeout=0, full_state=True)
        assert isinstance(r, SyncResponse), r
        self._since = r.next_batch
        if follow:
            self._task = asyncio.create_task(self._loop())

    async def follow(self) -> None:
        """Follow the room from here on, first caught up with everything since :meth:`start` (backfilled)."""
        if self._task is not None:
            return
        r = await self.client.sync(timeout=0, since=self._since)
        assert isinstance(r, SyncResponse), r
        await self._take(r)
        self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            try:
                r = await self.client.sync(timeout=5000, since=self._since)
            except Exception:
                await asyncio.sleep(0.2)
                continue
            if not isinstance(r, SyncResponse):
                await asyncio.sleep(0.2)
                continue
            await self._take(r)

    async def _take(self, r: SyncResponse) -> None:
        room = r.rooms.join.get(self.room_id)
        if room:
            if room.timeline.limited and room.timeline.prev_batch and self._since:
                self._events.extend(await self._backfill(room.timeline.prev_batch, self._since))
            self._events.extend(ev.source for ev in room.timeline.events)
        self._since = r.next_batch

    async def _backfill(self, start: str, until: str) -> list[dict[str, Any]]:
        """What a limited sync left out, oldest first (a person would scroll up)."""
        out: list[dict[str, Any]] = []
        token = start
        for _ in range(100):
            m = await self.client.room_messages(self.room_id, start=token, end=until,
                                                direction=MessageDirection.back, limit=100)
            if not isinstance(m, RoomMessagesResponse) or not m.chunk:
                break
            out.extend(ev.source for ev in m.chunk)
            if not m.end or m.end == token:
                break
            token = m.end
        out.reverse()
        return out

    async def close(self) -> None:
        if self._task:
            self._task.cancel()
        await self.client.close()

    def mark(self) -> int:
        """An index into ``events``: wait(..., start=mark) looks only at what came later."""
        return len(self.events)

    async def wait(self, pred: Pred, timeout: float = 30.0, start: int = 0) -> dict[str, Any] | None:
        await self.follow()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for ev in self.events[start:]:
                try:
                    if pred(ev):
                        return ev
                except Exception:
                    pass
            await asyncio.sleep(0.05)
        return None

    def find(self, pred: Pred, start: int = 0) -> list[dict[str, Any]]:
        out = []
        for ev in self.events[start:]:
            try:
                if pred(ev):
                    out.append(ev)
            except Exception:
                pass
        return out

    async def send(self, c: dict[str, Any], etype: str = "m.room.message") -> str:
        r = await self.client.room_send(self.room_id, etype, c)
        assert hasattr(r, "event_id"), r
        return str(r.event_id)

    async def text(
        self,
        body: str,
        reply_to: str | None = None,
        thread: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> str:
        c: dict[str, Any] = {"msgtype": "m.text", "body": body}
        if reply_to:
            c["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
        if thread:
            c["m.relates_to"] = {
                "rel_type": "m.thread",
                "event_id": thread,
                "is_falling_back": True,
                "m.in_reply_to": {"event_id": thread},
            }
        if extra:
            c.update(extra)
        return await self.send(c)

    async def react(self, event_id: str, key: str) -> str:
        return await self.send(
            {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}, "m.reaction"
        )

    async def edit(self, event_id: str, body: str) -> str:
        return await self.send(
            {
                "msgtype": "m.text",
                "body": "* " + body,
                "m.new_content": {"msgtype": "m.text", "body": body},
                "m.relates_to": {"rel_type": "m.replace", "event_id": event_id},
            }
        )
