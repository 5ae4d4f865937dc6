"""The daemon with its state in PostgreSQL (``PERMISSION_BOT_DATABASE_URL``): post, answer in the room, decide
through the API, a kill -9 and a restart lose nothing; a bad ``state.database`` is one line without its
password."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from bot.demo.homeserver import Homeserver
from tests.support.postgres import PgCluster
from tests.support.station import OwnStation, Station, request_body

pytestmark = pytest.mark.e2e


class PgStation(OwnStation):
    """A station of its own (accounts ``...pg``, so the session's station can register its own)."""

    suffix = "pg"


@pytest.fixture(scope="module")
async def pg_station(homeserver: Homeserver, workdir: Path, pg_cluster: PgCluster) -> AsyncIterator[Station]:
    st = PgStation(homeserver, workdir / "pg-station")
    st.env["PERMISSION_BOT_DATABASE_URL"] = await pg_cluster.create_database()
    await st.setup()
    yield st
    await st.teardown()


async def test_a_room_answer_and_an_api_decision_settle_in_postgresql(pg_station: Station, sid: str) -> None:
    st = pg_station
    a = await st.post(request_body(sid, key="k1"))
    again = await st.post(request_body(sid, key="k1"), want=200)
    assert again["id"] == a["id"]
    prompt = await st.prompt_for(sid)
    assert prompt, "no prompt in the room"
    waiter = asyncio.create_task(st.ahttp("GET", f"/permissions/{a['id']}?wait=30"))
    await st.alice.text("1", reply_to=prompt["event_id"])
    code, got = await asyncio.wait_for(waiter, 30)
    assert code == 200 and got["state"] == "resolved" and got["outcome"]["via"] == "matrix", got
    assert await st.edit_of(prompt["event_id"]), "the prompt was not edited"
    b = await st.post(request_body(sid, tool_call_id="c2"))
    assert b["id"] == f"{sid}:2"
    ls = st.cli("permissions", "ls", "--session", sid, env={"COLUMNS": "120"})  # brief pages from PostgreSQL
    assert ls.returncode == 0 and [row.split()[0] for row in ls.stdout.splitlines()[1:]] == [b["id"]], ls
    code, decided = await st.ahttp("POST", f"/permissions/{b['id']}", {"decision": "deny"})
    assert code == 200 and decided["state"] == "resolved"
    conn = await asyncpg.connect(st.env["PERMISSION_BOT_DATABASE_URL"])
    try:  # the state is in PostgreSQL, not in the state folder
        states = dict(await conn.fetch("SELECT id, state FROM requests WHERE session_id=$1", sid))
    finally:
        await conn.close()
    assert states == {a["id"]: "resolved", b["id"]: "resolved"}
    assert not (st.state_dir / "inbox.sqlite3").exists()


async def test_a_killed_daemon_on_postgresql_loses_nothing(pg_station: Station, sid: str) -> None:
    st = pg_station
    rec = await st.post(request_body(sid))
    prompt = await st.prompt_for(sid)
    assert prompt
    await st.restart_daemon(kill=True)
    waiter = asyncio.create_task(st.ahttp("GET", f"/permissions/{rec['id']}?wait=30"))
    await st.alice.text("1", reply_to=prompt["event_id"])
    code, got = await asyncio.wait_for(waiter, 30)
    assert code == 200 and got["state"] == "resolved" and got["outcome"]["via"] == "matrix", got
    assert len(st.alice.find(lambda e: st.is_prompt(e) and e["content"].get("session_id") == sid)) == 1


async def test_doctor_reads_the_database_on_another_machine(pg_station: Station, tmp_path: Path) -> None:
    """doctor where the state folder is empty (another host, a fresh container) but state.database is set: the
    daemons' saved session and the database's copy of the device are read; no false identity failure."""
    st = pg_station
    cfg = tmp_path / "elsewhere.toml"
    cfg.write_text(st.config_text().replace(str(st.state_dir), str(tmp_path / "empty-state")))
    env = {**os.environ, "PERMISSION_BOT_DATABASE_URL": st.env["PERMISSION_BOT_DATABASE_URL"]}
    p = await asyncio.to_thread(subprocess.run, [st.exe, "doctor", "--config", str(cfg)], capture_output=True,
                                text=True, timeout=90, env=env, stdin=subprocess.DEVNULL)
    lines = p.stdout.splitlines()
    assert not [x for x in lines if x.startswith("FAIL identity") or x.startswith("FAIL login")], p.stdout
    assert any(x.startswith("ok   login: the daemon's saved session") for x in lines), p.stdout
    assert any(x.startswith("ok   identity: published") and "the database's copy" in x for x in lines), p.stdout
    assert any(x.startswith("ok   encryption: device") and "kept in the database" in x for x in lines), p.stdout


@pytest.mark.parametrize("where", ["config", "env"])
def test_a_bad_database_url_is_one_line_without_the_password(tmp_path: Path, where: str) -> None:
    url = "postgresql://permbot:pw-very-secret@127.0.0.1:1/nothing"
    state = tmp_path / "state"
    text = (
        '[matrix]\nhomeserver = "http://127.0.0.1:9"\nuser_id = "@b:x"\npassword = "x"\nroom = "!r:x"\n'
        f'[answerers]\nusers = ["@a:x"]\n[api]\nlisten = "127.0.0.1:1"\ntoken = "t"\n[state]\npath = "{state}"\n'
    )
    env = {"PATH": "/usr/bin:/bin"}
    if where == "config":
        text += f'database = "{url}"\n'
    else:
        env["PERMISSION_BOT_DATABASE_URL"] = url
    cfg = tmp_path / "config.toml"
    cfg.write_text(text)
    r = subprocess.run([sys.executable, "-m", "bot", "run", "--config", str(cfg)], capture_output=True,
                       text=True, timeout=60, env=env)
    lines = [ln for ln in r.stderr.splitlines() if "state.database" in ln]
    assert r.returncode != 0 and len(lines) == 1, r.stderr
    assert "pw-very-secret" not in r.stderr + r.stdout and "postgresql://permbot@127.0.0.1:1/nothing" in lines[0], lines
