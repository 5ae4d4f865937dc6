"""The SSE event ring in-process: ids, resume after an id, and what happens beyond the ring."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from bot.api.events import EventLog


def _rec(n: int) -> Any:
    return SimpleNamespace(to_api=lambda: {"id": f"s:{n}"}, room="default")


def test_resume_after_a_kept_id_gives_the_rest_in_order() -> None:
    log = EventLog(size=3)
    for n in range(1, 4):
        log.on_change("request", _rec(n))
    last, missed = log.resume(log.event_id(1))
    kept, gone = log.after(last)
    assert not missed and not gone
    assert [(n, name) for n, name, _, _ in kept] == [(2, "permission-request"), (3, "permission-request")]


def test_no_header_means_live_only() -> None:
    log = EventLog()
    log.on_change("resolved", _rec(1))
    last, missed = log.resume(None)
    assert log.after(last) == ([], False) and not missed


def test_beyond_the_ring_or_another_run_is_reported_as_missed() -> None:
    log = EventLog(size=2)
    for n in range(1, 5):
        log.on_change("request", _rec(n))
    kept, gone = log.after(log.resume(log.event_id(1))[0])
    assert gone and [n for n, _, _, _ in kept] == [3, 4]  # 2 fell out of the ring
    for bad in ("other-1", "garbage", log.event_id(99), f"{log.epoch}-x"):
        last, missed = log.resume(bad)
        assert missed and [n for n, _, _, _ in log.after(last)[0]] == [3, 4]


async def test_waiting_streams_are_woken() -> None:
    import asyncio

    log = EventLog()
    tick = log.tick
    waiter = asyncio.create_task(tick.wait())
    log.on_change("request", _rec(1))
    await asyncio.wait_for(waiter, 1)
    assert not log.tick.is_set()


def test_an_odd_last_event_id_means_missed_events_never_an_error() -> None:
    """``EPOCH-²`` passes str.isdigit but not int(); nor do other digits, signs, spaces or 5,000 digits."""
    log = EventLog(size=2)
    for n in range(1, 4):
        log.on_change("request", _rec(n))
    for odd in ("²", "\u0663", "\uff11", "+1", "-1", " 1", "1_0", "0x1", "9" * 5000, "", "\udcc2"):
        last, missed = log.resume(f"{log.epoch}-{odd}")
        assert missed and last == 0, odd
        assert [n for n, _, _, _ in log.after(last)[0]] == [2, 3]
