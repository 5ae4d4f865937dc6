"""The homeserver away (real Synapse behind the tests' fault proxy, refusing connections): at start, and
later under the sync. The daemon keeps retrying; its log says once what is wrong and what to check
(matrix.homeserver), the tries after are debug lines, and one line says when it is back."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.support.fault_station import FaultStation, fault_station_fixture

pytestmark = pytest.mark.e2e

fst = fault_station_fixture("hsdown", "hsd")


def events(text: str, event: str, level: str = "") -> list[str]:
    return [x for x in text.splitlines() if f"event='{event}'" in x and f"level='{level}'" in x]


async def log_until(st: FaultStation, start: int, event: str, count: int = 1, timeout: float = 60) -> str:
    """The daemon's log after ``start`` once ``event`` is in it ``count`` times."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = st.log_text()[start:]
        if text.count(f"event='{event}'") >= count:
            return text
        await asyncio.sleep(0.2)
    raise AssertionError(f"no {count} x {event} in:\n{st.log_text()[start:][-3000:]}")


async def test_the_homeserver_down_at_start_is_said_once_and_so_is_its_return(fst: FaultStation) -> None:
    fst.stop_daemon()
    start = len(fst.log_text())
    fst.proxy.mode = "reset"  # every connection refused, as a port with no server
    fst.proxy.cut()
    fst.start_daemon()
    try:
        text = await log_until(fst, start, "matrix_unreachable", count=4)  # it keeps trying
    finally:
        fst.proxy.mode = "pass"
    said = events(text, "matrix_unreachable", "warning")
    assert len(said) == 1, said
    assert "check matrix.homeserver" in said[0] and fst.proxy.url in said[0], said[0]
    assert len(events(text, "matrix_unreachable", "debug")) >= 3  # the tries after: quiet
    await fst.wait_healthy()
    text = await log_until(fst, start, "matrix_reachable")
    assert len(events(text, "matrix_reachable", "info")) == 1 and "during='homeserver'" in text


async def test_the_homeserver_away_under_the_sync_is_said_once_and_so_is_its_return(fst: FaultStation) -> None:
    await fst.wait_healthy()
    start = len(fst.log_text())
    fst.proxy.mode = "reset"
    fst.proxy.cut()
    try:
        text = await log_until(fst, start, "sync_failed", count=3)
    finally:
        fst.proxy.mode = "pass"
    said = events(text, "sync_failed", "warning")
    assert len(said) == 1 and "check matrix.homeserver" in said[0], said
    text = await log_until(fst, start, "sync_back")
    assert len(events(text, "sync_back", "info")) == 1
    await fst.wait_healthy()
