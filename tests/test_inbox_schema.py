"""The inbox schema is versioned: old state folders are upgraded in place, newer ones refused."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bot.inbox import ledger, schema
from bot.inbox.db import SQLITE, Connection, SchemaTooNew, Step, create
from bot.inbox.record import Settlement
from bot.inbox.store import Inbox
from bot.inbox.submission import parse_submission
from tests.support.station import request_body
from tests.test_questions_fast import question_bodies

# The schema exactly as first released (commit 6b05906), before versions existed.
FIRST_RELEASE = SQLITE.ddl(schema.V1_DDL)  # the first release's tables as SQLite ran them


_OLD_ROW = (
    "INSERT INTO requests (id, session_id, request_seq, tool_call_id, title, options, locations, content,"
    " params, digest, revision, state, requested_at, expires_at, prompt_event_id)"
    " VALUES ('s:1','s',1,'c','Old','[]','[]','[]','{}','d',1,'pending',1.0,2.0,'$old')"
)


def _make_first_release(path: Path) -> None:
    db = sqlite3.connect(path)
    db.executescript(FIRST_RELEASE)
    db.execute(_OLD_ROW)
    db.execute("INSERT INTO seq (session_id, last) VALUES ('s', 1)")
    db.commit()
    db.close()


def _user_version(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0])
    finally:
        db.close()


async def test_first_release_state_folder_is_upgraded_and_keeps_its_requests(tmp_path: Path) -> None:
    path = tmp_path / "inbox.sqlite3"
    _make_first_release(path)
    inbox = Inbox(path)
    await inbox.open()
    try:
        rec = await inbox.get("s:1")
        assert rec is not None and rec.title == "Old" and rec.pending
        assert rec.room == "default"  # step 10: what was there belongs to the default room
        await inbox.set_prompt_event("s:1", "$new", 5.0)  # failed with "no such column: posted_at" before
        await inbox.park("$e", {"event_id": "$e"}, 1.0)
        assert await inbox.take_parked() == [{"event_id": "$e"}]
        # every later step's columns and tables work on the upgraded folder: a new request (cwd,
        # submitted_by), its settlement, and the old session's numbering carried on
        body = {**request_body("s", tool_call_id="c2"), "cwd": "/work"}
        new, created = await inbox.submit(parse_submission(body), 10.0, 60)
        assert created and new.id == "s:2" and new.cwd == "/work"
        assert await inbox.settle(new.id, Settlement(option_id="allow_once", by="@a:x", via="matrix", now=11.0))
        # step 10: a request and a timeline mark of another room; step 11: a durable hold on posting
        held, _ = await inbox.submit(parse_submission(request_body("t")), 12.0, 60, hold_post=True, room="infra")
        assert held.room == "infra" and held.id not in [r.id for r in await inbox.needing_post()]
        await inbox.release_post(held.id)
        assert held.id in [r.id for r in await inbox.needing_post()]
        assert await inbox.place("$infra", "posted", held.id, room="infra") > 0
        await _this_waves_steps_work(inbox)
    finally:
        await inbox.close()
    assert _user_version(path) == schema.LATEST


async def _this_waves_steps_work(inbox: Inbox) -> None:
    """Steps 12-17 on an upgraded database: a question (kind), a hook request's holder, the ledger appended by a
    settlement, the brief listing page."""
    question = parse_submission(question_bodies("q")[0])
    q, created = await inbox.submit(question, 20.0, 60, held_by="daemon-a")
    assert created and q.kind == "question" and q.pending
    before = (await ledger.head(inbox.database))[0]
    assert await inbox.settle(q.id, Settlement(option_id="decline", by="@a:x", via="matrix", now=21.0))
    assert (await ledger.head(inbox.database))[0] == before + 1
    page, _ = await inbox.pending_brief_json(10)
    assert '"s:1"' in page.decode()


async def test_the_last_released_schema_upgrades_on_both_engines(
    engine_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database as the last release left it (through step 11, post_held: SQLite or PostgreSQL, with a pending
    request) is brought up to LATEST by this wave's steps and keeps what it held."""
    released = [s.description for s in schema.STEPS].index("post_held") + 1
    monkeypatch.setattr(schema, "LATEST", released)
    old = create(engine_url, holder="released")
    await old.start()
    try:
        assert await schema.upgrade(old) == released
        await old.execute(_OLD_ROW.replace("2.0", "9e9"))  # not due: still pending after the upgrade
        await old.execute("INSERT INTO seq (session_id, last) VALUES ('s', 1)")
    finally:
        await old.stop()
    monkeypatch.setattr(schema, "LATEST", len(schema.STEPS))
    inbox = Inbox(create(engine_url, holder="upgraded"))
    await inbox.open()
    try:
        kept = await inbox.get("s:1")
        assert kept is not None and kept.pending and kept.title == "Old" and kept.room == "default"
        await _this_waves_steps_work(inbox)
    finally:
        await inbox.close()


async def test_unversioned_folder_with_later_columns_upgrades(tmp_path: Path) -> None:
    """A folder written by the landed code before versions (posted_at and parked already there)."""
    path = tmp_path / "inbox.sqlite3"
    _make_first_release(path)
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE requests ADD COLUMN posted_at REAL")
    db.execute("CREATE TABLE parked (event_id TEXT PRIMARY KEY, source TEXT NOT NULL, at REAL NOT NULL)")
    db.commit()
    db.close()
    inbox = Inbox(path)
    await inbox.open()
    await inbox.close()
    assert _user_version(path) == schema.LATEST


async def test_empty_prompt_event_ids_become_the_post_skipped_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder from before the step (rule-settled requests never posted held ``prompt_event_id=''``)."""
    path = tmp_path / "inbox.sqlite3"
    before = [s.description for s in schema.STEPS].index("post_skipped")
    with monkeypatch.context() as m:
        m.setattr(schema, "LATEST", before)
        inbox = Inbox(path)
        await inbox.open()
        await inbox.close()
    assert _user_version(path) == before
    db = sqlite3.connect(path)
    for rid, state, event in [("s:1", "resolved", ""), ("s:2", "pending", None), ("s:3", "resolved", "$p")]:
        db.execute(
            "INSERT INTO requests (id, session_id, request_seq, tool_call_id, title, options, locations, content,"
            " params, digest, revision, state, requested_at, expires_at, prompt_event_id, outcome_via, decided_at)"
            " VALUES (?,'s',?,'c','T','[]','[]','[]','{}','d',1,?,1.0,2.0,?,?,3.0)",
            (rid, int(rid[2:]), state, event, None if state == "pending" else "rule"),
        )
    db.execute("INSERT INTO seq (session_id, last) VALUES ('s', 3)")
    db.commit()
    db.close()
    inbox = Inbox(path)
    await inbox.open()
    try:
        skipped = await inbox.get("s:1")
        assert skipped is not None and skipped.prompt_event_id is None and not skipped.pending
        # as before: the never-posted one is neither posted nor edited; the others go on as they were
        assert [r.id for r in await inbox.needing_post()] == ["s:2"]
        assert [r.id for r in await inbox.needing_edit()] == ["s:3"]
    finally:
        await inbox.close()
    assert _user_version(path) == schema.LATEST
    db = sqlite3.connect(path)
    assert db.execute("SELECT COUNT(*) FROM requests WHERE prompt_event_id=''").fetchone()[0] == 0
    db.close()


async def test_new_folder_starts_at_latest_and_reopens(tmp_path: Path) -> None:
    path = tmp_path / "inbox.sqlite3"
    for _ in range(2):
        inbox = Inbox(path)
        await inbox.open()
        await inbox.close()
    assert _user_version(path) == schema.LATEST


async def test_failed_step_rolls_back_and_keeps_the_old_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "inbox.sqlite3"
    _make_first_release(path)

    async def broken(db: Connection) -> None:
        await db.execute("CREATE TABLE half_done (x)")
        raise RuntimeError("step failed")

    monkeypatch.setattr(schema, "STEPS", [*schema.STEPS, Step("broken", broken, broken)])
    monkeypatch.setattr(schema, "LATEST", len(schema.STEPS))
    inbox = Inbox(path)
    with pytest.raises(RuntimeError):
        await inbox.open()
    await inbox.close()
    assert _user_version(path) == schema.LATEST - 1
    db = sqlite3.connect(path)
    assert db.execute("SELECT 1 FROM sqlite_master WHERE name='half_done'").fetchone() is None
    db.close()


async def test_newer_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "inbox.sqlite3"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {schema.LATEST + 5}")
    db.commit()
    db.close()
    inbox = Inbox(path)
    with pytest.raises(SchemaTooNew, match="newer than this permission-bot knows"):
        await inbox.open()
    await inbox.close()


def test_run_refuses_a_newer_state_folder_with_one_line(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    db = sqlite3.connect(state / "inbox.sqlite3")
    db.execute(f"PRAGMA user_version = {schema.LATEST + 1}")
    db.commit()
    db.close()
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        '[matrix]\nhomeserver = "http://127.0.0.1:9"\nuser_id = "@b:x"\npassword = "pw-secret"\nroom = "!r:x"\n'
        f'[answerers]\nusers = ["@a:x"]\n[api]\nlisten = "127.0.0.1:1"\ntoken = "t"\n[state]\npath = "{state}"\n'
    )
    r = subprocess.run([sys.executable, "-m", "bot", "run", "--config", str(cfg)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "newer than this permission-bot" in ln]
    assert len(lines) == 1, r.stderr
