"""state.database values: engines, paths, the env override, and never a password in a message."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest
from asyncpg.connect_utils import _parse_connect_dsn_and_args

from bot.inbox.db import DatabaseUrlError, create, mask, parse
from bot.inbox.db.pgurl import parse_pg
from bot.inbox.db.postgres import PostgresDatabase, rows_changed
from bot.inbox.db.sqlite import SqliteDatabase
from bot.inbox.db.url import ENV, resolve, scrub, secrets_of

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
    assert t.shown == f"{scheme.lower()}://permbot@db.example.org:5433/permbot?sslmode=require"  # no password
    db = create(url, holder="h1")
    assert isinstance(db, PostgresDatabase) and db.tag == "pb:h1"


def test_password_in_the_query_is_found_and_masked() -> None:
    t = parse(f"postgresql://db.example.org/permbot?user=permbot&password={SECRET}&sslmode=require")
    assert t.password == SECRET
    assert t.shown == "postgresql://db.example.org/permbot?user=permbot&sslmode=require"


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
    assert mask("postgresql://u:p@ss/w@h/d said") == "postgresql://u:***@h/d said"
    assert mask(f"x postgresql://h/d?user=u&pass%77ord={SECRET}&a=1") == "x postgresql://h/d?user=u&pass%77ord=***&a=1"
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


# issue 32: passwords the driver would read in pieces, or from the query; hosts as a list
PW_CHARS = "p/ss?w@rd#x%y"


@pytest.mark.parametrize(
    "value",
    [
        f"postgresql://u:{SECRET}/x@h/d",  # an unencoded / : the driver reads host "u", port "hunter2-Secret"
        f"postgresql://u:{SECRET}@x@h/d",  # a second @ : the driver reads host "x@h"
        f"postgresql://u:{SECRET}?x@h/d",  # an unencoded ?
        f"postgresql://u:{SECRET}#x@h/d",  # an unencoded #
        f"postgresql://u:1234?b={SECRET}@h/d",
        f"postgresql://h/d?password={SECRET}&",  # not key=value pairs: the driver would quote the field
        f"postgresql://u:{SECRET}@h:99999/d",
        f"postgresql://u:{SECRET}@h1,,h2/d",
    ],
)
def test_a_password_read_in_pieces_is_refused_without_a_piece(value: str) -> None:
    with pytest.raises(DatabaseUrlError) as e:
        parse(value, key="env PERMISSION_BOT_DATABASE_URL")
    msg = str(e.value)
    assert msg.startswith("env PERMISSION_BOT_DATABASE_URL: not a valid PostgreSQL URL"), msg
    for piece in (SECRET, "hunter", "Secret", "x@h", "1234"):
        assert piece not in msg, (piece, msg)
    assert any(SECRET in s for s in secrets_of(value)), "the masker is told anyway"


@pytest.mark.parametrize(
    ("value", "password", "shown"),
    [
        (f"postgresql://u:{quote(PW_CHARS, safe='')}@h/d", PW_CHARS, "postgresql://u@h/d"),
        (f"postgresql://h/d?user=u&password={quote(PW_CHARS, safe='')}", PW_CHARS, "postgresql://h/d?user=u"),
        (f"postgresql://h/d?pass%77ord={SECRET}&sslmode=disable", SECRET, "postgresql://h/d?sslmode=disable"),
        (f"postgresql://h/d?password=a&password={SECRET}", SECRET, "postgresql://h/d"),  # the last wins
        (f"postgresql://h/d?Password={SECRET}", None, "postgresql://h/d"),  # not the driver's, still never shown
        (f"postgresql://u:{SECRET}@h/d?password=other", SECRET, "postgresql://u@h/d"),  # the netloc's wins
        ("postgresql://db1:5433,db2,[::1]:6000/x?target_session_attrs=read-write", None,
         "postgresql://db1:5433,db2,[::1]:6000/x?target_session_attrs=read-write"),
        ("postgresql://%2Fvar%2Frun%2Fpg/x?user=me%40srv", None, "postgresql://%2Fvar%2Frun%2Fpg/x?user=me%40srv"),
        ("postgresql:///x?host=%2Ftmp&sslpassword=ssl-key-pw", None, "postgresql:///x?host=%2Ftmp"),
    ],
)
def test_the_password_is_the_drivers_and_the_url_is_shown_without_it(
    value: str, password: str | None, shown: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = parse(value)
    assert t.password == password and t.shown == shown
    assert password is None or password in t.secrets
    for s in t.secrets:
        assert s not in t.shown
    for s in t.secrets:
        assert s not in scrub(f"FATAL: {s} and {value}", t)
    # the same reading as the driver's own
    for var in ("PGPASSWORD", "PGUSER", "PGHOST", "PGPORT", "PGDATABASE", "PGSERVICE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PGPASSFILE", "/nonexistent/pgpass")
    monkeypatch.setenv("PGSERVICEFILE", "/nonexistent/pg_service.conf")
    addrs, params = _parse_connect_dsn_and_args(
        dsn=value, host=None, port=None, user=None, password=None, passfile=None, database=None, ssl=None,
        service=None, servicefile=None, direct_tls=None, server_settings=None, target_session_attrs=None,
        krbsrvname=None, gsslib=None,
    )
    assert params.password == password
    want = [h + f"/.s.PGSQL.{p or 5432}" if h.startswith("/") else (h, p or 5432) for h, p in t.hosts]
    assert not t.hosts or list(addrs) == want
    assert parse_pg(value).user in (params.user, None)


def test_secrets_of_reads_generously() -> None:
    assert secrets_of(None) == []
    assert "p/ss@w" in secrets_of("postgresql://u:p/ss@w@h/d")
    assert SECRET in secrets_of(f"postgresql://h/d?Pass%77ord={SECRET}")
    assert secrets_of("sqlite:/x/y.db") == []
