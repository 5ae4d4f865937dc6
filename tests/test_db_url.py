"""state.database values: engines, paths, the env override, and never a password in a message."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.inbox.db import DatabaseUrlError, create, mask, parse
from bot.inbox.db.postgres import PostgresDatabase, rows_changed
from bot.inbox.db.sqlite import SqliteDatabase
from bot.inbox.db.url import ENV, resolve, scrub

SECRET = "hunter2-Secret"


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ("sqlite:state/inbox.sqlite3", "state/inbox.sqlite3"),
        ("sqlite:///var/lib/pb/inbox.sqlite3", "/var/lib/pb/inbox.sqlite3"),
        ("/var/lib/pb/inbox.sqlite3", "/var/lib/pb/inbox.sqlite3"),
        ("state/inbox.sqlite3", "state/inbox.sqlite3"),
        ("sqlite:with%20space.db", "with space.db"),
    ],
)
def test_sqlite_forms(value: str, path: str) -> None:
    t = parse(value)
    assert t.engine == "sqlite" and t.path == Path(path)
    assert isinstance(create(value), SqliteDatabase)


@pytest.mark.parametrize("scheme", ["postgresql", "postgres", "PostgreSQL"])
def test_postgres_forms(scheme: str) -> None:
    url = f"{scheme}://permbot:{SECRET}@db.example.org:5433/permbot?sslmode=require"
    t = parse(url)
    assert t.engine == "postgresql" and t.dsn == url and t.password == SECRET
    assert SECRET not in t.shown and "permbot:***@db.example.org" in t.shown
    db = create(url, holder="h1")
    assert isinstance(db, PostgresDatabase) and db.tag == "pb:h1"


def test_password_in_the_query_is_found_and_masked() -> None:
    t = parse(f"postgresql://db.example.org/permbot?user=permbot&password={SECRET}&sslmode=require")
    assert t.password == SECRET
    assert SECRET not in t.shown and "password=***&sslmode=require" in t.shown


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (f"postgresql://permbot:{SECRET}@db.example.org:notaport/permbot", "not a valid PostgreSQL URL"),
        (f"mysql://permbot:{SECRET}@db.example.org/permbot", "unknown kind 'mysql'"),
        (f"postgresql://permbot:{SECRET}@db.example.org/permbot#frag", "no #fragment"),
        ("sqlite:", "needs a file path"),
        ("sqlite::memory:", "needs a file path"),
        ("   ", "empty"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_key_and_no_password(value: str, says: str) -> None:
    with pytest.raises(DatabaseUrlError) as e:
        parse(value)
    msg = str(e.value)
    assert msg.startswith("state.database: ") and says in msg
    assert SECRET not in msg and "\n" not in msg


def test_mask_and_scrub() -> None:
    assert mask(f"postgresql://u:{SECRET}@h/d") == "postgresql://u:***@h/d"
    assert mask("postgresql://u@h/d") == "postgresql://u@h/d"
    t = parse(f"postgresql://u:{SECRET}@h/d")
    assert SECRET not in scrub(f"FATAL: something echoed {SECRET} back", t)


def test_the_environment_wins() -> None:
    assert resolve("sqlite:a.db", {ENV: "postgresql://h/d"}) == "postgresql://h/d"
    assert resolve("sqlite:a.db", {}) == "sqlite:a.db"
    assert resolve(None, {}) is None
    assert resolve(None, {ENV: ""}) is None


def test_command_tags_give_row_counts() -> None:
    assert rows_changed("UPDATE 3") == 3
    assert rows_changed("INSERT 0 1") == 1
    assert rows_changed("CREATE TABLE") == 0
