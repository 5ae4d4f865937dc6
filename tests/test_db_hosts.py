"""Several hosts in ``state.database`` (issue 36): libpq's multi-host form is taken, read-write by default,
a bad port in any entry is one line naming the key (never the password); and /healthz's database reason."""

from __future__ import annotations

import pytest

from bot.inbox.db import DatabaseUrlError, create, parse
from bot.inbox.db.postgres import CONNECT_TIMEOUT, PostgresDatabase
from bot.inbox.db.url import session_attrs
from bot.service.health import Facts, body, database_reasons

SECRET = "hunter2-Secret"


@pytest.mark.parametrize(
    ("url", "attrs"),
    [
        (f"postgresql://permbot:{SECRET}@db1,db2/permbot", "read-write"),
        (f"postgresql://permbot:{SECRET}@db1:5432,db2:5433/permbot?sslmode=require", "read-write"),
        ("postgresql://db1,db2/permbot?target_session_attrs=read-write", "read-write"),
        ("postgresql://db1,db2/permbot?target_session_attrs=any", "any"),
        ("postgresql://[::1]:5432,db2/permbot", "read-write"),
        ("postgresql://db1/permbot", None),
        ("postgresql://db1/permbot?target_session_attrs=primary", "primary"),
    ],
)
def test_several_hosts_are_taken_read_write_unless_said(url: str, attrs: str | None) -> None:
    t = parse(url)
    assert t.engine == "postgresql" and t.dsn == url and SECRET not in t.shown
    assert session_attrs(t) == attrs
    db = create(url, holder="h")
    assert isinstance(db, PostgresDatabase)
    options = db._connect_options()
    assert options.get("target_session_attrs") == attrs and options["timeout"] == CONNECT_TIMEOUT


@pytest.mark.parametrize("netloc", ["db1:5432,db2:99999", "db1:abc,db2", "db1:0,db2"])
def test_a_bad_port_in_any_host_is_one_line_naming_the_key(netloc: str) -> None:
    with pytest.raises(DatabaseUrlError) as e:
        parse(f"postgresql://permbot:{SECRET}@{netloc}/permbot")
    msg = str(e.value)
    assert msg.startswith("state.database: ") and "\n" not in msg and SECRET not in msg


def test_healthz_says_the_database_is_unreachable_in_any_role() -> None:
    facts = Facts(ready=True, joined=True, last_sync_ok=100.0, ready_at=90.0, sync_timeout=30.0, send_failing=None)
    assert body(facts, 101.0, True)["status"] == "ok"
    for role in ("leader", "standby"):
        out = body(facts, 101.0, True, role=role, database=(95.0, "ConnectionRefusedError: refused"))
        assert out["status"] == "degraded" and out["role"] == role
        assert out["reasons"] == ["database unreachable for 6 s, retrying: ConnectionRefusedError: refused"]
    assert database_reasons(None, 5.0) == []
