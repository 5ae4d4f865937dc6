"""The sync loop and the sync filter, on the in-process fake homeserver (no Synapse): the bot's own
``Matrix`` façade and nio's parsing, against real HTTP on loopback."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.matrix.client import SYNC_KEY, Matrix
from bot.matrix.sync_filter import FILTER_KEY, TIMELINE_TYPES
from tests.support.fake_facade import MemoryKV
from tests.support.fake_station import FakeStation, until
from tests.support.fakematrix import FakeHomeserver
from tests.support.human import content


class Bot:
    """The Matrix side alone over one key/value store: started, stopped, started again."""

    def __init__(self, st: FakeStation, tmp: Path) -> None:
        self.st = st
        self.tmp = tmp
        self.kv = MemoryKV()
        self.seen: list[dict[str, Any]] = []
        self.fail_on: set[str] = set()  # bodies whose handling fails once (a storage error)
        self.matrix: Matrix | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def handle(self, source: dict[str, Any]) -> None:
        self.seen.append(source)
        body = content(source).get("body")
        if body in self.fail_on:
            self.fail_on.discard(body)
            raise sqlite3.OperationalError("disk I/O error")

    def bodies(self) -> list[str]:
        return [content(e)["body"] for e in self.seen if e.get("sender") == self.st.alice and "body" in content(e)]

    async def start(self) -> Matrix:
        m = self.matrix = Matrix(self.st.matrix_config(), self.kv, str(self.tmp))
        await m.session.login()
        await m.join_room()
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(m.sync_forever(self.handle, self._stop))
        await until(m.syncer.synced.is_set, what="the first sync")
        return m

    async def stop(self) -> None:
        assert self._task and self.matrix
        self._stop.set()
        await asyncio.wait_for(self._task, 5)
        await self.matrix.close()


@pytest.fixture
async def hs() -> AsyncIterator[FakeHomeserver]:
    server = await FakeHomeserver().start()
    yield server
    await server.close()


@pytest.fixture
async def bot(hs: FakeHomeserver, tmp_path: Path) -> AsyncIterator[Bot]:
    b = Bot(FakeStation(hs, tmp_path / "state"), tmp_path)
    yield b
    if b._task and not b._task.done():
        await b.stop()


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bot.matrix.retry.FIRST_DELAY", 0.01)


def say(bot: Bot, *bodies: str) -> list[str]:
    return [bot.st.text(bot.st.alice, b) for b in bodies]


async def test_events_come_in_order_and_next_batch_is_saved_only_after_the_batch(bot: Bot, hs: FakeHomeserver) -> None:
    await bot.start()
    saved_while_handling: list[Any] = []
    handle = bot.handle

    async def watching(source: dict[str, Any]) -> None:
        if content(source).get("body") == "b2":
            saved_while_handling.append(await bot.kv.get_json(SYNC_KEY))
        await handle(source)

    bot.handle = watching  # type: ignore[method-assign]
    await bot.stop()
    await bot.start()
    before = hs.token()
    say(bot, "b1", "b2", "b3")
    await until(lambda: bot.bodies() == ["b1", "b2", "b3"], what="three messages")
    assert saved_while_handling == [before]  # the batch holding b2 was not yet marked as handled
    await until(lambda: bot.kv.data.get(SYNC_KEY) == hs.token(), what="the token saved")


async def test_a_batch_that_fails_midway_is_fetched_and_handled_again(bot: Bot, hs: FakeHomeserver) -> None:
    await bot.start()
    saved = bot.kv.data[SYNC_KEY]
    bot.fail_on = {"c2"}
    say(bot, "c1", "c2", "c3")
    await until(lambda: bot.bodies()[-3:] == ["c1", "c2", "c3"], what="the batch handled again")
    assert bot.bodies() == ["c1", "c2", "c1", "c2", "c3"]  # nothing skipped; the handler's dedupe makes it once
    await until(lambda: bot.kv.data[SYNC_KEY] != saved, what="the token moved once the batch was handled")


async def test_a_limited_timeline_is_backfilled_oldest_first(bot: Bot, hs: FakeHomeserver) -> None:
    await bot.start()
    bodies = [f"d{i}" for i in range(35)]  # more than the timeline limit (10): the next sync is limited
    say(bot, *bodies)
    await until(lambda: bot.bodies() == bodies, what="every message, in order")
    assert hs.count("messages") >= 1


async def test_a_failing_backfill_fails_the_batch_which_comes_again_whole(bot: Bot, hs: FakeHomeserver) -> None:
    await bot.start()
    await bot.stop()
    bodies = [f"e{i}" for i in range(25)]
    say(bot, *bodies)
    hs.fail("messages", times=2, status=400, errcode="M_UNKNOWN")
    await bot.start()
    await until(lambda: bot.bodies() == bodies, what="every message once the backfill works")
    assert hs.count("messages") >= 3


async def test_a_restart_resumes_from_the_saved_token(bot: Bot, hs: FakeHomeserver) -> None:
    await bot.start()
    say(bot, "f1")
    await until(lambda: bot.bodies() == ["f1"])
    await bot.stop()
    saved = bot.kv.data[SYNC_KEY]
    say(bot, "f2", "f3")
    n = hs.count("sync")
    await bot.start()
    await until(lambda: bot.bodies() == ["f1", "f2", "f3"])
    assert hs.queries("sync")[n]["since"] == saved  # the first sync of the new run


async def test_an_invite_elsewhere_is_refused(bot: Bot, hs: FakeHomeserver) -> None:
    await bot.start()
    other = hs.create_room(bot.st.bob, invite=[bot.st.bot])
    await until(lambda: hs.rooms[other].membership(bot.st.bot) == "leave", what="the invite refused")
    assert hs.rooms[bot.st.room].membership(bot.st.bot) == "join"


# -- the sync filter ------------------------------------------------------------------
async def test_the_filter_is_created_once_kept_and_reused_after_a_restart(bot: Bot, hs: FakeHomeserver) -> None:
    await bot.start()
    assert hs.count("filter") == 1
    fid = bot.kv.data[FILTER_KEY]["filter_id"]
    assert {q.get("filter") for q in hs.queries("sync")} == {fid}
    definition = hs.filters[bot.st.bot][fid]
    room = definition["room"]
    assert room["rooms"] == [bot.st.room]
    assert set(TIMELINE_TYPES) >= {"m.room.message", "m.reaction", "m.room.redaction", "m.room.encrypted"}
    assert room["timeline"]["types"] == TIMELINE_TYPES and "not_senders" not in room["timeline"]
    assert definition["presence"] == {"not_types": ["*"]} and definition["account_data"] == {"not_types": ["*"]}
    assert room["state"]["lazy_load_members"] is False
    await bot.stop()
    n = hs.count("sync")
    await bot.start()
    say(bot, "g1")
    await until(lambda: bot.bodies() == ["g1"])
    assert hs.count("filter") == 1
    assert {q.get("filter") for q in hs.queries("sync")[n:]} == {fid}


async def test_the_filter_keeps_the_bots_own_events_and_drops_what_it_does_not_read(
    bot: Bot, hs: FakeHomeserver
) -> None:
    m = await bot.start()
    hs.set_state(bot.st.room, bot.st.alice, "m.room.topic", {"topic": "not read"})
    hs.send_as(bot.st.alice, bot.st.room, {"body": "typing-ish"}, "org.example.custom")
    own = await m.send({"msgtype": "m.notice", "body": "own"}, "txn-own")
    say(bot, "h1")
    await until(lambda: bot.bodies() == ["h1"])
    types = [e["type"] for e in bot.seen]
    assert own in [e["event_id"] for e in bot.seen]  # the bot's own events stay (plain-answer binding)
    assert "m.room.topic" not in types and "org.example.custom" not in types


async def test_an_unknown_filter_is_made_again(bot: Bot, hs: FakeHomeserver) -> None:
    await bot.start()
    old = bot.kv.data[FILTER_KEY]["filter_id"]
    hs.forget_filters()  # e.g. a homeserver restored from a backup
    say(bot, "i1")  # wakes the long poll; the next sync with the old id gets 400 M_INVALID_PARAM
    await until(lambda: (bot.kv.data.get(FILTER_KEY) or {}).get("filter_id", old) != old, what="a new filter")
    say(bot, "i2")
    await until(lambda: bot.bodies() == ["i1", "i2"], what="the messages after the filter was made again")
    new = bot.kv.data[FILTER_KEY]["filter_id"]
    assert hs.count("filter") == 2 and new in hs.filters[bot.st.bot]
    assert hs.queries("sync")[-1]["filter"] == new


async def test_a_filter_the_server_will_not_store_is_sent_inline(bot: Bot, hs: FakeHomeserver) -> None:
    hs.fail("filter", times=1, status=400, errcode="M_BAD_JSON")
    await bot.start()
    say(bot, "j1")
    await until(lambda: bot.bodies() == ["j1"])
    assert all(q["filter"].startswith("{") for q in hs.queries("sync"))
    assert bot.kv.data.get(FILTER_KEY) is None


async def test_a_kicked_bot_knows_it_and_joins_again_when_invited_back(bot: Bot, hs: FakeHomeserver) -> None:
    m = await bot.start()
    st = bot.st
    hs.set_state(st.room, st.alice, "m.room.member", {"membership": "leave"}, st.bot)  # kicked
    await until(lambda: not m.syncer.joined, what="the bot knows it left")
    hs.set_state(st.room, st.alice, "m.room.member", {"membership": "invite"}, st.bot)
    await until(lambda: hs.rooms[st.room].membership(st.bot) == "join", what="joined again")
    say(bot, "k1")
    await until(lambda: bot.bodies()[-1:] == ["k1"] and m.syncer.joined, what="reading the room again")


async def test_a_homeserver_that_fails_syncs_for_a_while_loses_nothing(bot: Bot, hs: FakeHomeserver) -> None:
    m = await bot.start()
    hs.fail("sync", times=4, status=502)
    await until(lambda: len(hs.faults["sync"]) < 3 and not m.syncer.connected, what="the outage")
    say(bot, "l1", "l2")  # sent while the bot cannot sync
    await until(lambda: bot.bodies() == ["l1", "l2"], what="every message after the outage")
    await until(lambda: m.syncer.connected, what="connected again")
