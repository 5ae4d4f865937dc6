"""`permission-bot state migrate` on a real daemon's state folder: the daemon stopped, its SQLite inbox copied
into an empty PostgreSQL database, a daemon started on that database sees the same records, does not post a
prompt twice, and settles the pending one from an answer in the room."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from bot.demo.homeserver import Homeserver
from tests.support.postgres import APP_PASSWORD, PgCluster
from tests.support.station import OwnStation, request_body

pytestmark = pytest.mark.e2e


class MigratedStation(OwnStation):
    """A station of its own (accounts ``...mg``): its daemon starts on SQLite and moves to PostgreSQL."""

    suffix = "mg"


async def _answer(st: OwnStation, rid: str, prompt: dict[str, Any]) -> dict[str, Any]:
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
        code, a = await st.ahttp("POST", "/permissions", request_body(sid, key="k1"))
        assert code == 201, a
        pa = await st.prompt_for(sid, seq=1)
        code, b = await st.ahttp("POST", "/permissions", request_body(sid, tool_call_id="c2"))
        assert code == 201, b
        pb = await st.prompt_for(sid, seq=2)
        assert pa and pb, "no prompts in the room"
        got_b = await _answer(st, b["id"], pb)
        code, c = await st.ahttp("POST", "/permissions", request_body(sid, tool_call_id="c3"))
        assert code == 201
        code, got_c = await st.ahttp("POST", f"/permissions/{c['id']}", {"decision": "deny"})
        assert code == 200 and got_c["state"] == "resolved"
        assert await st.edit_of(pb["event_id"]), "the answered prompt was not edited"
        st.stop_daemon()

        url = await pg_cluster.create_database()
        refused = st.cli("state", "migrate", "--to", url, "--config", str(st.config_path))
        assert refused.returncode == 1 and "crypto store" in refused.stderr, refused.stderr
        assert len(refused.stderr.splitlines()) == 1 and APP_PASSWORD not in refused.stdout + refused.stderr
        done = st.cli("state", "migrate", "--to", url, "--config", str(st.config_path), "--without-crypto")
        assert done.returncode == 0, done.stderr
        assert "requests: 3 rows" in done.stdout and APP_PASSWORD not in done.stdout + done.stderr
        again = st.cli("state", "migrate", "--to", url, "--config", str(st.config_path), "--without-crypto")
        assert again.returncode == 1 and "not empty" in again.stderr, again.stderr

        st.env["PERMISSION_BOT_DATABASE_URL"] = url
        (st.state_dir / "inbox.sqlite3").rename(st.state_dir / "inbox.sqlite3.migrated")  # only the database now
        st.start_daemon()
        await st.wait_healthy()
        for before in (got_b, got_c):
            code, after = await st.ahttp("GET", f"/permissions/{before['id']}")
            assert code == 200 and after["state"] == "resolved" and after["outcome"] == before["outcome"], after
        code, pending = await st.ahttp("GET", "/permissions?session=" + sid)
        assert code == 200 and [r["id"] for r in pending] == [a["id"]], pending
        code, same = await st.ahttp("POST", "/permissions", request_body(sid, key="k1"))
        assert code == 200 and same["id"] == a["id"]  # the key still binds to the carried record
        await _answer(st, a["id"], pa)
        assert await st.edit_of(pa["event_id"]), "the pending prompt was not edited when settled"
        code, d = await st.ahttp("POST", "/permissions", request_body(sid, tool_call_id="c4"))
        assert code == 201 and d["id"] == f"{sid}:4"  # the session's numbering goes on
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
