"""`permission-bot state migrate` on a real daemon's state folder, in an encrypted room: the daemon stopped, its
SQLite inbox and its device's crypto store copied into an empty PostgreSQL database, a daemon started on that
database in a fresh state folder is the same device (no new login), sees the same records, does not post a
prompt twice, and settles the pending one from an encrypted answer in the room."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from bot.demo.homeserver import Homeserver, http
from tests.support.e2e_human import E2EStation
from tests.support.postgres import APP_PASSWORD, PgCluster, kv_value
from tests.support.station import Station, request_body

pytestmark = pytest.mark.e2e


class MigratedStation(E2EStation):
    """An encrypted station of its own (accounts ``...mg``): its daemon starts on SQLite, moves to PostgreSQL."""

    def __init__(self, hs: Homeserver, workdir: Path) -> None:
        super().__init__(hs, workdir, "mg")


async def _answer(st: Station, rid: str, prompt: dict[str, Any]) -> dict[str, Any]:
    """alice answers ``1`` in reply to the prompt: the record, settled from the room."""
    waiter = asyncio.create_task(st.ahttp("GET", f"/permissions/{rid}?wait=30"))
    await st.alice.text("1", reply_to=prompt["event_id"])
    code, got = await asyncio.wait_for(waiter, 30)
    assert code == 200 and got["state"] == "resolved" and got["outcome"]["via"] == "matrix", got
    return dict(got)


async def test_a_daemon_on_the_migrated_database_goes_on_where_the_sqlite_one_stopped(
    homeserver: Homeserver, workdir: Path, pg_cluster: PgCluster, sid: str
) -> None:
    st = MigratedStation(homeserver, workdir / "migrated-station")
    await st.setup()
    try:
        a = await st.post(request_body(sid, key="k1"))
        pa = await st.prompt_for(sid, seq=1)
        b = await st.post(request_body(sid, tool_call_id="c2"))
        pb = await st.prompt_for(sid, seq=2)
        assert pa and pb, "no prompts in the room"
        got_b = await _answer(st, b["id"], pb)
        c = await st.post(request_body(sid, tool_call_id="c3"))
        code, got_c = await st.ahttp("POST", f"/permissions/{c['id']}", {"decision": "deny"})
        assert code == 200 and got_c["state"] == "resolved"
        assert await st.edit_of(pb["event_id"]), "the answered prompt was not edited"
        device, devices = st.kv("matrix.session")["device_id"], st.bot_devices()
        st.stop_daemon()

        url = await pg_cluster.create_database()
        done = st.cli("state", "migrate", "--to", url, "--config", str(st.config_path))
        assert done.returncode == 0, done.stderr
        assert "requests: 3 rows" in done.stdout and APP_PASSWORD not in done.stdout + done.stderr
        assert f"crypto store of device {device} carried" in done.stdout and "cross_signing.json" in done.stdout
        again = st.cli("state", "migrate", "--to", url, "--config", str(st.config_path))
        assert again.returncode == 1 and "not empty" in again.stderr, again.stderr

        st.env["PERMISSION_BOT_DATABASE_URL"] = url
        st.state_dir = st.dir / "state-fresh"  # only the database now: the device comes from it
        st.write_config()
        st.start_daemon()
        await st.wait_healthy()
        session = await kv_value(url, "matrix.session")
        assert session["device_id"] == device and "crypto_store_restored" in st.log_text()
        now = http("GET", st.hs.url + "/_matrix/client/v3/devices", token=session["access_token"])
        assert sorted(d["device_id"] for d in now["devices"]) == devices  # no new login
        for before in (got_b, got_c):
            after = await st.record(before["id"], wait=None)
            assert after["state"] == "resolved" and after["outcome"] == before["outcome"], after
        code, pending = await st.ahttp("GET", "/permissions?session=" + sid)
        assert code == 200 and [r["id"] for r in pending] == [a["id"]], pending
        same = await st.post(request_body(sid, key="k1"), want=200)
        assert same["id"] == a["id"]  # the key still binds to the carried record
        await _answer(st, a["id"], pa)
        assert await st.edit_of(pa["event_id"]), "the pending prompt was not edited when settled"
        d = await st.post(request_body(sid, tool_call_id="c4"))
        assert d["id"] == f"{sid}:4"  # the session's numbering goes on
        assert await st.prompt_for(sid, seq=4)
        prompts = st.alice.find(lambda e: st.is_prompt(e) and e["content"].get("session_id") == sid)
        assert sorted(e["content"]["request_seq"] for e in prompts) == [1, 2, 3, 4]  # none posted twice
        conn = await asyncpg.connect(url)
        try:
            assert await conn.fetchval("SELECT count(*) FROM requests WHERE session_id=$1", sid) == 4
        finally:
            await conn.close()
    finally:
        await st.teardown()
