"""The station-room sync filter on a real Synapse: created once, kept in the inbox, reused after a restart,
and the bot still reads every answer through it."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from typing import Any

import pytest
from nio import AsyncClient, SyncResponse

from bot.demo.homeserver import http
from bot.matrix.session import SESSION_KEY
from bot.matrix.sync_filter import FILTER_KEY, station_filter
from bot.util.jsonhttp import quote
from tests.support.station import Station, request_body

pytestmark = pytest.mark.e2e


def _kv(station: Station, key: str) -> Any:
    db = sqlite3.connect(station.state_dir / "inbox.sqlite3")
    try:
        row = db.execute("SELECT v FROM kv WHERE k=?", (key,)).fetchone()
    finally:
        db.close()
    return json.loads(row[0]) if row else None


def _created(station: Station) -> int:
    return station.log_path.read_text(errors="replace").count("sync_filter_created")


async def test_the_filter_is_created_once_kept_after_a_restart_and_answers_still_count(
    station: Station, sid: str
) -> None:
    kept = _kv(station, FILTER_KEY)
    assert kept and kept["user_id"] == station.bot_id and kept["filter_id"]
    token = _kv(station, SESSION_KEY)["access_token"]
    on_server = http(
        "GET", f"{station.hs.url}/_matrix/client/v3/user/{quote(station.bot_id)}/filter/{quote(kept['filter_id'])}",
        token=token,
    )
    assert on_server["room"]["rooms"] == [station.room_id]
    assert on_server["room"]["timeline"]["types"] == station_filter(station.room_id)["room"]["timeline"]["types"]
    created = _created(station)
    await station.restart_daemon()
    assert _kv(station, FILTER_KEY) == kept  # reused, not made again
    assert _created(station) == created
    await station.drain()
    rec, prompt = await station.submit(request_body(sid))
    await station.alice.text("2", reply_to=prompt["event_id"])
    got = await station.record(rec["id"])
    assert got["state"] == "resolved" and got["outcome"]["option_id"] == "allow_always"
    rec, _prompt = await station.submit(request_body(sid, tool_call_id="call_2"))
    await station.alice.text("1")  # a plain answer: binds through the bot's own prompt and edits in the timeline
    got = await station.record(rec["id"])
    assert got["state"] == "resolved" and got["outcome"]["option_id"] == "allow_once"


async def _quiet(c: AsyncClient, since: str, flt: dict[str, Any]) -> str:
    """Sync until a long-poll of 1.5 s comes back empty (what earlier tests left, edits and clean-ups, is in)."""
    for _ in range(40):
        r = await c.sync(timeout=1500, since=since, sync_filter=flt)
        assert isinstance(r, SyncResponse), r
        since = r.next_batch
        if not any(v.timeline.events for v in r.rooms.join.values()):
            return since
    raise AssertionError("the room never went quiet")


async def test_typing_and_receipts_do_not_end_the_bots_long_poll(station: Station) -> None:
    """A person's client sends a read receipt and typing just before the answer: through the filter neither
    ends the bot's long-poll (no sync round lost just before the answer); the message does, at once."""
    flt = station_filter(station.room_id)
    c = AsyncClient(station.carol.client.homeserver, station.carol.user_id)
    c.access_token, c.user_id = station.carol.token, station.carol.user_id
    try:
        first = await c.sync(timeout=0, full_state=True, sync_filter=flt)
        assert isinstance(first, SyncResponse), first
        since = await _quiet(c, first.next_batch, flt)
        poll = asyncio.ensure_future(c.sync(timeout=3000, since=since, sync_filter=flt))
        await asyncio.sleep(0.3)
        started = time.monotonic()
        last = station.alice.events[-1]["event_id"] if station.alice.events else None
        await station.alice.client.room_typing(station.room_id, True, 5000)
        if last:
            await station.alice.client.room_read_markers(station.room_id, last, last)
        await asyncio.sleep(1.0)
        assert not poll.done(), "typing or a read receipt ended the filtered long-poll"
        event_id = await station.alice.text("1 sec, let me check")
        r = await asyncio.wait_for(poll, 10)
        assert isinstance(r, SyncResponse), r
        assert time.monotonic() - started < 2.9, "the message did not end the long-poll"
        room = r.rooms.join[station.room_id]
        assert [e.event_id for e in room.timeline.events] == [event_id]
        assert room.ephemeral == []
    finally:
        await station.alice.client.room_typing(station.room_id, False)
        await c.close()
