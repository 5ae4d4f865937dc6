"""The station on the fake homeserver: the bot, alice (answerer), bob (not), carol (power 50), one room,
and the daemon in-process (its Supervisor, as ``permission-bot run`` drives it), for fast tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from bot.config import Config, MatrixConfig, parse_config
from bot.inbox.record import Record
from bot.matrix.client import Matrix
from bot.service.daemon import Daemon
from bot.service.supervisor import Supervisor
from tests.support.fakematrix import FakeHomeserver
from tests.support.human import content, rel
from tests.support.station import V2

BOT_PASSWORD = "bot-pw"


async def until(pred: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Wait until ``pred()`` is truthy (polled every 10 ms); its value."""
    deadline = time.monotonic() + timeout
    while not (v := pred()):
        assert time.monotonic() < deadline, f"{what} not reached in {timeout} s"
        await asyncio.sleep(0.01)
    return v


class FakeStation:
    """People and a room on ``hs``; the daemon started, stopped and restarted over one state folder."""

    def __init__(self, hs: FakeHomeserver, state: Path) -> None:
        self.hs = hs
        self.state = state
        self.bot = hs.register("permbot", BOT_PASSWORD)
        self.alice, self.bob, self.carol = (hs.register(n) for n in ("alice", "bob", "carol"))
        self.room = hs.create_room(self.alice, invite=[self.bot, self.bob, self.carol], power={self.carol: 50})
        hs.join(self.bob, self.room)
        hs.join(self.carol, self.room)
        self.answerers: dict[str, Any] = {"users": [self.alice]}
        self.prompts: dict[str, Any] = {"timeout": "10m"}
        self.matrix_extra: dict[str, Any] = {}  # e.g. {"password": None, "access_token": ...}
        self.rules: list[dict[str, Any]] = []  # [[rules]]
        self.daemon: Daemon | None = None
        self._run: asyncio.Task[int] | None = None

    def matrix_config(self) -> MatrixConfig:
        return self.config().matrix

    def config(self) -> Config:
        return parse_config({
            "matrix": {"homeserver": self.hs.url, "user_id": self.bot, "password": BOT_PASSWORD, "room": self.room,
                       "encryption": False, "trust": "tofu", "sync_timeout": 0.2, **self.matrix_extra},
            "answerers": self.answerers, "prompts": self.prompts, "state": {"path": str(self.state)},
            "api": {"max_pending_per_token": 100_000, "max_pending_per_session": 100_000},  # tests pile requests up
            **({"rules": self.rules} if self.rules else {}),
        }, env={})

    @property
    def d(self) -> Daemon:
        assert self.daemon is not None, "the daemon is not running"
        return self.daemon

    @property
    def matrix(self) -> Matrix:
        return self.d.matrix

    async def start(self) -> Daemon:
        d = self.daemon = Daemon(self.config())
        await d.start()
        run = self._run = asyncio.create_task(Supervisor(d, grace=5.0).run())
        await until(lambda: (d.ready and d.matrix.syncer.synced.is_set()) or run.done(), what="the first sync")
        assert not run.done(), f"the daemon stopped: {run.result()}"
        return d

    async def stop(self) -> int:
        """Stop the daemon (if it has not stopped on its own); its exit code."""
        d, run = self.d, self._run
        assert run is not None
        d.stop.set()
        code = await asyncio.wait_for(run, 15)
        await d.close()
        self.daemon = self._run = None
        return code

    async def exited(self, timeout: float = 10.0) -> int:
        """The exit code of a daemon that stops on its own."""
        run = self._run
        assert run is not None
        code = await asyncio.wait_for(run, timeout)
        await self.d.close()
        self.daemon = self._run = None
        return code

    async def restart(self) -> Daemon:
        await self.stop()
        return await self.start()

    # -- the room ---------------------------------------------------------------
    def text(self, user: str, body: str, reply_to: str | None = None, thread: str | None = None,
             extra: dict[str, Any] | None = None) -> str:
        c: dict[str, Any] = {"msgtype": "m.text", "body": body}
        if reply_to:
            c["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
        if thread:
            c["m.relates_to"] = {"rel_type": "m.thread", "event_id": thread, "is_falling_back": True,
                                 "m.in_reply_to": {"event_id": thread}}
        c.update(extra or {})
        return self.hs.send_as(user, self.room, c)

    def react(self, user: str, event_id: str, key: str) -> str:
        return self.hs.send_as(
            user, self.room, {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}},
            "m.reaction",
        )

    def bot_events(self, start: int = 0) -> list[dict[str, Any]]:
        return self.hs.events(self.room, self.bot)[start:]

    def mark(self) -> int:
        return len(self.hs.events(self.room, self.bot))

    def prompts_of(self, session_id: str) -> list[dict[str, Any]]:
        return [e for e in self.bot_events() if e["type"] == "m.room.message"
                and content(e).get("suite_event_type") == V2 and content(e).get("session_id") == session_id
                and rel(e).get("rel_type") != "m.replace"]

    def edits_of(self, event_id: str) -> list[dict[str, Any]]:
        return [e for e in self.bot_events()
                if rel(e).get("rel_type") == "m.replace" and rel(e).get("event_id") == event_id]

    def notices(self, start: int = 0, contains: str = "") -> list[dict[str, Any]]:
        return [e for e in self.bot_events(start)
                if content(e).get("msgtype") == "m.notice" and contains in content(e).get("body", "")]

    async def submit(self, body: dict[str, Any]) -> tuple[Record, dict[str, Any]]:
        """Submit through the daemon's service (as the HTTP API does) and wait for the prompt."""
        rec, created = await self.d.submit(body, "api.token")
        assert created
        prompt = await until(
            lambda: [p for p in self.prompts_of(rec.session_id) if content(p).get("request_seq") == rec.request_seq],
            what="the prompt")
        return rec, prompt[0]

    async def settled(self, request_id: str, timeout: float = 10.0) -> Record:
        rec = await self.d.inbox.wait_settled(request_id, timeout)
        assert rec is not None and not rec.pending, f"{request_id} still pending"
        return rec

    async def pending_after(self, request_id: str, seconds: float = 0.5) -> bool:
        await asyncio.sleep(seconds)
        rec = await self.d.inbox.get(request_id)
        return rec is not None and rec.pending



@pytest.fixture
async def fst(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeStation]:
    """The station on a fresh fake homeserver, the daemon started (Matrix retries quick: 10 ms first)."""
    monkeypatch.setattr("bot.matrix.retry.FIRST_DELAY", 0.01)
    hs = await FakeHomeserver().start()
    st = FakeStation(hs, tmp_path / "state")
    await st.start()
    yield st
    if st.daemon is not None:
        await st.stop()
    await hs.close()
