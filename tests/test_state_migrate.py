"""`permission-bot state migrate`: a SQLite inbox copied into an empty PostgreSQL database, every row and id
kept, the identity sequences set past them; a used target refused and left as it was; a bad URL one line
without its password; the saved device's crypto store carried in the same transaction (left behind with
``--without-crypto``)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest
from nio import AsyncClient, AsyncClientConfig

from bot.events.states import Via
from bot.inbox.db import create
from bot.inbox.migrate import MigrateError, migrate
from bot.inbox.record import Settlement
from bot.inbox.schema import LATEST, STEPS
from bot.inbox.session_rule_store import SessionRules
from bot.inbox.session_rules import Scope
from bot.inbox.store import Inbox
from bot.inbox.submission import parse_submission
from bot.matrix.store import STORE
from bot.matrix.vault import VAULT_KEY, archive_of, unpack
from tests.support.postgres import PgCluster, kv_value
from tests.support.station import request_body

TABLES = ("requests", "seq", "handled", "kv", "reactions", "parked", "harness_links", "timeline", "session_rules",
          "ledger", "ledger_head", "daemon_leases")


async def _fill(path: Path) -> dict[str, str]:
    """An inbox with requests in several states, marks, reactions, session rules, kv: the ids it made."""
    inbox = Inbox(path)
    await inbox.open()
    try:
        pending, _ = await inbox.submit(parse_submission({**request_body("s1"), "key": "k1"}), 1.0, 600)
        settled, _ = await inbox.submit(parse_submission(request_body("s1", tool_call_id="c2")), 2.0, 600)
        expired, _ = await inbox.submit(parse_submission(request_body("s2")), 3.0, 600, room="other")
        await inbox.set_prompt_event(pending.id, "$p1", now=4.0)
        await inbox.set_prompt_event(settled.id, "$p2", now=4.0)
        await inbox.place("$p1", "posted", pending.id)
        await inbox.place("$p2", "posted", settled.id)
        await inbox.place("$a1", "answer")
        await inbox.add_reaction(pending.id, "1", "$r1")
        await inbox.settle(settled.id, Settlement("allow_once", "@alice:x", Via.MATRIX, 5.0, feedback="ok"))
        await inbox.settle(expired.id, Settlement(option_id=None, by="timeout", via=Via.TIMEOUT, now=6.0))
        await inbox.mark_handled("$h1", 7.0)
        await inbox.set_json("matrix.session", {"user_id": "@bot:x", "device_id": "DEV", "access_token": "tok"})
        await inbox.set_kv("matrix.sync_token", "s123")
        rules = SessionRules(inbox)
        await rules.add(Scope("o1", "s1", "Bash", '{"command":"ls"}'), set_by="@alice:x", request_id=settled.id,
                        now=5.0)
        gone = await rules.add(Scope("o1", "s1", "Bash", '{"command":"rm"}'), set_by="@alice:x",
                               request_id=settled.id, now=5.0)
        await rules.revoke(gone.id)  # SQLite's AUTOINCREMENT never gives this id again; nor may PostgreSQL
        return {"pending": pending.id, "settled": settled.id, "expired": expired.id}
    finally:
        await inbox.close()


async def _same_rows(path: Path, url: str) -> dict[str, int]:
    """Every table holds the same rows (in the target's columns, SQLite's ``rowid`` included) on both sides."""
    conn = await asyncpg.connect(url)
    src = sqlite3.connect(path)
    counts = {}
    try:
        for t in TABLES:
            rows = await conn.fetch(f"SELECT * FROM {t}")
            cols = [str(c["column_name"]) for c in await conn.fetch(
                "SELECT column_name FROM information_schema.columns WHERE table_name=$1 ORDER BY ordinal_position", t)]
            mine = sorted(tuple(r) for r in src.execute(f"SELECT {', '.join(cols)} FROM {t}").fetchall())
            assert sorted(tuple(r) for r in rows) == mine, t
            counts[t] = len(mine)
    finally:
        src.close()
        await conn.close()
    return counts


async def test_every_row_and_id_is_carried_and_the_database_goes_on_from_there(tmp_path: Path, pg_url: str) -> None:
    path = tmp_path / "state" / "inbox.sqlite3"
    ids = await _fill(path)
    copied = await migrate(path, pg_url)
    assert copied.upgraded_from is None
    counts = await _same_rows(path, pg_url)
    assert copied.rows == {t: counts[t] for t in copied.rows} and set(TABLES) <= set(copied.rows)
    assert counts["requests"] == 3 and counts["timeline"] == 3 and counts["session_rules"] == 1
    inbox = Inbox(create(pg_url, holder="after"))
    await inbox.open()
    try:
        assert (await inbox.get_json("matrix.session"))["device_id"] == "DEV"
        assert await inbox.get_kv("matrix.sync_token") == "s123"
        rec = await inbox.get(ids["pending"])
        assert rec is not None and rec.state == "pending" and rec.prompt_event_id == "$p1"
        done = await inbox.get(ids["settled"])
        assert done is not None and done.state == "resolved" and done.outcome is not None
        assert done.outcome.answered_by == "@alice:x" and done.outcome.feedback == "ok"
        again, created = await inbox.submit(parse_submission({**request_body("s1"), "key": "k1"}), 9.0, 600)
        assert again.id == ids["pending"] and not created  # the key binds to the carried record
        nxt, created = await inbox.submit(parse_submission(request_body("s1", tool_call_id="c9")), 9.0, 600)
        assert created and nxt.id == "s1:3"  # the session's numbering goes on
        assert await inbox.place("$a2", "answer") == 4  # the identity sequence is past the copied positions
        rule = await SessionRules(inbox).add(Scope("o1", "s1", "Bash", '{"command":"pwd"}'), set_by="@alice:x",
                                             request_id=ids["settled"], now=9.0)
        assert rule.id == 3  # past SQLite's high-water mark (rule 2 was revoked), never reused
        got = await inbox.settle(ids["pending"], Settlement(option_id="allow_once", by="@alice:x", via=Via.MATRIX,
                                 feedback=None, now=10.0))
        assert got is not None and got.state == "resolved"
        assert await inbox.settle(ids["pending"], Settlement(option_id="allow_once", by="@alice:x", via=Via.MATRIX,
                                  feedback=None, now=11.0)) is None
    finally:
        await inbox.close()


async def test_a_used_target_is_refused_and_left_as_it_was(tmp_path: Path, pg_url: str) -> None:
    path = tmp_path / "state" / "inbox.sqlite3"
    await _fill(path)
    await migrate(path, pg_url)
    before = await _same_rows(path, pg_url)
    with pytest.raises(MigrateError, match=r"not empty \(.*requests \(3\)"):
        await migrate(path, pg_url)
    assert await _same_rows(path, pg_url) == before  # nothing copied twice


async def test_a_database_a_daemon_opened_is_not_empty(tmp_path: Path, pg_url: str) -> None:
    path = tmp_path / "state" / "inbox.sqlite3"
    await _fill(path)
    used = Inbox(create(pg_url, holder="d"))
    await used.open()  # writes its install id: the migrated one must not meet another
    await used.close()
    with pytest.raises(MigrateError, match=r"kv \(1\)"):
        await migrate(path, pg_url)


async def test_an_older_folder_is_brought_up_to_date_first(tmp_path: Path, pg_url: str) -> None:
    path = tmp_path / "state" / "inbox.sqlite3"
    await _fill(path)
    src = sqlite3.connect(path)
    before = next(i for i, step in enumerate(STEPS) if step.description == "post_held")  # the version before it
    src.execute("UPDATE schema_versions SET version=$1 WHERE name='inbox'".replace("$1", str(before)))
    src.execute(f"PRAGMA user_version = {before}")
    src.execute("ALTER TABLE requests DROP COLUMN post_held")  # as the step before post_held left it
    src.commit()
    src.close()
    copied = await migrate(path, pg_url)
    assert copied.upgraded_from == before < LATEST and copied.rows["requests"] == 3


def _cli(tmp_path: Path, *args: str, encryption: bool = True, env: dict[str, str] | None = None,
         database: str = "") -> subprocess.CompletedProcess[str]:
    state = tmp_path / "state"
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        '[matrix]\nhomeserver = "http://127.0.0.1:9"\nuser_id = "@b:x"\npassword = "x"\nroom = "!r:x"\n'
        f"encryption = {str(encryption).lower()}\n"
        '[answerers]\nusers = ["@a:x"]\n[api]\nlisten = "127.0.0.1:1"\ntoken = "t"\n'
        f'[state]\npath = "{state}"\n' + (f'database = "{database}"\n' if database else "")
    )
    return subprocess.run([sys.executable, "-m", "bot", "state", "migrate", "--config", str(cfg), *args],
                          capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin", **(env or {})})


@pytest.mark.parametrize("where", ["--to", "state.database", "env"])
def test_a_bad_url_is_one_line_naming_it_without_the_password(tmp_path: Path, where: str) -> None:
    url = "postgresql://permbot:pw-very-secret@127.0.0.1:99999/nothing"
    if where == "--to":
        r = _cli(tmp_path, "--to", url)
    elif where == "env":
        r = _cli(tmp_path, env={"PERMISSION_BOT_DATABASE_URL": url})
    else:
        r = _cli(tmp_path, database=url)
    key = {"--to": "--to", "env": "state.database (env PERMISSION_BOT_DATABASE_URL)"}.get(where, "state.database")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith(f"permission-bot: {key}: "), r.stderr
    assert "pw-very-secret" not in r.stdout + r.stderr and "99999" not in r.stderr  # the port: maybe a password's


def test_a_folder_without_an_inbox_is_one_line_without_the_password(tmp_path: Path) -> None:
    url = "postgresql://permbot:pw-very-secret@127.0.0.1:1/nothing"
    r = _cli(tmp_path, "--to-env", "TARGET_URL", encryption=False, env={"TARGET_URL": url})
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr  # no inbox: said before any connection
    assert "pw-very-secret" not in r.stdout + r.stderr


def _nio_store(state: Path) -> dict[str, str]:
    """A real nio crypto store of the saved session's device (``@b:x``'s ``DEV``) under ``state``: its keys."""
    c = AsyncClient("http://127.0.0.1:9", "@b:x", store_path=str(state),
                    config=AsyncClientConfig(encryption_enabled=True, store=STORE, store_sync_tokens=False))
    c.restore_login("@b:x", "DEV", "tok")
    assert c.olm is not None
    return dict(c.olm.account.identity_keys)


async def test_the_crypto_store_is_carried_in_the_same_transaction(
    tmp_path: Path, pg_url: str, pg_cluster: PgCluster
) -> None:
    state = tmp_path / "state"
    await _fill(state / "inbox.sqlite3")
    store = state / "@b:x_DEV.db"
    store.write_bytes(b"nio")  # damaged: refused, one line, nothing written
    r = _cli(tmp_path, "--to-env", "TARGET", env={"TARGET": pg_url})
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "crypto store" in r.stderr, r.stderr
    conn = await asyncpg.connect(pg_url)
    try:
        assert await conn.fetchval("SELECT count(*) FROM requests") == 0  # the copy rolled back
    finally:
        await conn.close()
    store.unlink()
    keys = _nio_store(state)
    (state / "cross_signing.json").write_text('{"master": "m"}')
    (tmp_path / "target-url").write_text(pg_url + "\n")
    r = _cli(tmp_path, "--to-file", str(tmp_path / "target-url"))
    assert r.returncode == 0, r.stderr
    assert "requests: 3 rows" in r.stdout and "crypto store of device DEV carried" in r.stdout, r.stdout
    assert "left behind" not in r.stdout and "pg-app-pw" not in r.stdout
    saved = await kv_value(pg_url, VAULT_KEY)
    assert (await kv_value(pg_url, "matrix.session"))["device_id"] == saved["device_id"] == "DEV"
    fresh = tmp_path / "fresh"
    unpack(archive_of(saved, "@b:x", "DEV"), fresh, "@b:x", "DEV")
    assert _nio_store(fresh) == keys  # the same device, in a folder of its own
    assert (fresh / "cross_signing.json").read_text() == '{"master": "m"}'
    other = await pg_cluster.create_database()
    r = _cli(tmp_path, "--to", other, "--without-crypto")
    assert r.returncode == 0, r.stderr
    assert "requests: 3 rows" in r.stdout and "left behind" in r.stdout and "carried" not in r.stdout
    assert await kv_value(other, VAULT_KEY) is None
    r = _cli(tmp_path, "--to", other)
    assert r.returncode == 1 and "not empty" in r.stderr and r.stderr.count("\n") == 1, r.stderr
