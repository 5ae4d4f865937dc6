"""The station-room sync filter on a real Synapse: created once, kept in the inbox, reused after a restart,
and the bot still reads every answer through it."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest

from bot.demo.homeserver import http
from bot.jsonhttp import quote
from bot.matrix.session import SESSION_KEY
from bot.matrix.sync_filter import FILTER_KEY, station_filter
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
