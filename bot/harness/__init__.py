"""Watched harnesses: harnesses that keep their own permission inbox (seed 002), answered from the room.

Parts: ``client`` (discovery, routes), ``mapping`` (record -> submission, record -> decision; pure),
``watcher`` (poll, take, ask again when changed, withdraw, re-read and deliver), ``check`` (doctor);
bot/inbox/links.py keeps harness id -> request id and the delivery state, and moves a link to a changed
record's new revision. The service starts the watchers.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp

from bot.config import HarnessConfig
from bot.harness.client import Client
from bot.harness.watcher import Watcher
from bot.inbox.record import Record
from bot.inbox.store import Inbox
from bot.inbox.submission import SubmissionError


class Harnesses:
    """Every ``[[harnesses]]`` watcher of one daemon: their tasks, their health, their wake-ups."""

    def __init__(self, cfgs: list[HarnessConfig], inbox: Inbox, *, now: Callable[[], float], timeout: float,
                 after_new: Callable[[Record], Awaitable[Record]] | None = None, env: Mapping[str, str] | None = None,
                 room_of: Callable[[str], str] = lambda name: "default") -> None:
        """``room_of``: a harness's name -> the station room its requests go to."""
        env = os.environ if env is None else env
        self.watchers = [Watcher(c, inbox, now=now, timeout=timeout, env=env, after_new=after_new,
                                 room=room_of(c.name)) for c in cfgs]
        self._session: aiohttp.ClientSession | None = None

    def on_change(self, kind: str, rec: Record) -> None:
        """Inbox listener: a settled request of a harness wakes its watcher to send the answer back."""
        if kind != "resolved":
            return
        for w in self.watchers:
            if rec.session_id.startswith(f"{w.name}:"):
                w.wake.set()

    def refuse_reserved(self, session_id: str) -> None:
        """SubmissionError for a submission into a watched harness's sessions (``NAME:...``): only it may."""
        for w in self.watchers:
            if session_id.startswith(f"{w.name}:"):
                raise SubmissionError(f"sessionId: {w.name}: is reserved for the watched harness {w.name}")

    def wake(self, name: str) -> bool:
        """Poll harness ``name`` now (one of its events arrived); False when no harness has that name."""
        for w in self.watchers:
            if w.name == name:
                w.wake.set()
                return True
        return False

    def health(self) -> list[dict[str, Any]]:
        return [w.health() for w in self.watchers]

    def tasks(self, stop: asyncio.Event) -> list[asyncio.Task[None]]:
        if not self.watchers:
            return []
        self._session = self._session or aiohttp.ClientSession()
        client = Client(self._session)
        return [asyncio.create_task(w.run(client, stop), name=f"harness:{w.name}") for w in self.watchers]

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
