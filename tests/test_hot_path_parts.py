"""The parts the latency work added to the hot path (bench/latency.py measures their effect):
nio's store without its per-sync write, a short line to the agent written at once, uvloop."""

from __future__ import annotations

import asyncio
import os
import select
import threading
from pathlib import Path
from typing import Any

import pytest
from nio import AsyncClient, AsyncClientConfig

from bot.door.relay import FdSink
from bot.matrix.store import STORE
from bot.util import aio


def test_store_skips_the_write_for_no_rooms_and_saves_a_room(tmp_path: Path) -> None:
    assert STORE is not None
    c = AsyncClient("http://127.0.0.1:1", "@bot:hs", device_id="DEV", store_path=str(tmp_path),
                    config=AsyncClientConfig(store=STORE, encryption_enabled=True))
    c.access_token, c.user_id, c.device_id = "t", "@bot:hs", "DEV"
    c.load_store()
    store = c.store
    assert isinstance(store, STORE)
    calls: list[str] = []
    real = store._get_account
    store._get_account = lambda: calls.append("account") or real()  # type: ignore[method-assign]
    store.save_encrypted_rooms(set())
    assert calls == [], "an empty set still queried the store"
    store.save_encrypted_rooms({"!r:hs"})
    assert calls == ["account"]
    assert "!r:hs" in store.load_encrypted_rooms()
    asyncio.run(c.close())


def test_a_short_line_is_written_at_once_without_a_thread() -> None:
    r, w = os.pipe()
    sink = FdSink(w, owned=True)
    try:
        before = threading.active_count()
        assert sink.try_write(b'{"jsonrpc":"2.0","id":1,"result":{}}\n')
        assert threading.active_count() == before
        assert os.read(r, 100) == b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
        assert not sink.try_write(b"x" * (select.PIPE_BUF + 1)), "a long line must take the blocking way"
    finally:
        sink.close()
        os.close(r)


def test_a_full_pipe_or_a_busy_sink_is_left_to_the_blocking_write() -> None:
    r, w = os.pipe()
    os.set_blocking(w, False)
    sink = FdSink(w, owned=True)
    try:
        try:
            while True:
                os.write(w, b"x" * 4096)
        except BlockingIOError:
            pass
        assert not sink.try_write(b"answer\n"), "wrote into a full pipe (it would have blocked the loop)"
        sink.hold()  # the relay thread streaming a long line
        held = threading.Thread(target=lambda: results.append(sink.try_write(b"a\n")))
        results: list[bool] = []
        held.start()
        held.join(5)
        assert results == [False], "wrote in the middle of another writer's line"
        sink.release()
    finally:
        sink.close()
        os.close(r)


def test_a_closed_sink_refuses() -> None:
    r, w = os.pipe()
    sink = FdSink(w, owned=True)
    sink.close()
    with pytest.raises(ConnectionError):
        sink.try_write(b"late\n")
    os.close(r)


def test_run_uses_uvloop_where_installed() -> None:
    import uvloop  # a dependency on CPython/Linux (pyproject)

    async def kind() -> Any:
        return type(asyncio.get_running_loop())

    assert aio.run(kind()) is uvloop.Loop
