"""issue 32: the database password never reaches any output, however the URL is written, against a real
PostgreSQL: `permission-bot run` (a password with an unencoded ``/`` or ``@``, or given as ``?password=`` or
``?pass%77ord=``; the database reachable or not; from the config or ``PERMISSION_BOT_DATABASE_URL``) and
`permission-bot state migrate` (``--to``, ``--to-env``, ``--to-file``), which also really connects with a
password full of URL syntax, percent-encoded, as the driver reads it."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from urllib.parse import quote

import asyncpg
import pytest

from bot.demo.homeserver import free_port
from bot.inbox.db import create
from bot.inbox.store import Inbox
from tests.support.postgres import PgCluster
from tests.support.station import exe_path

pytestmark = pytest.mark.e2e

ODD_ROLE = "pb_odd"
ODD_PASSWORD = "Tr0ub4dor/&3@x?Horse#Battery=Staple%41 Zebra"  # every piece a URL reads as syntax
WRONG = "Wr0ngPass/Kangaroo@Quokka?Wombat"
PIECES = [p for p in re.split(r"[/&@?#=% ]", ODD_PASSWORD + "/" + WRONG) if len(p) >= 4]


def leaked(text: str) -> list[str]:
    return [p for p in (ODD_PASSWORD, WRONG, quote(WRONG, safe=""), *PIECES) if p in text]


def config(tmp: Path, database: str | None) -> Path:
    cfg = tmp / "config.toml"
    cfg.write_text(
        '[matrix]\nhomeserver = "http://127.0.0.1:9"\nuser_id = "@b:x"\npassword = "x"\nroom = "!r:x"\n'
        '[answerers]\nusers = ["@a:x"]\n[api]\nlisten = "127.0.0.1:1"\ntoken = "t"\n'
        f"[state]\npath = {json.dumps(str(tmp / 'state'))}\n"
        + (f"database = {json.dumps(database)}\n" if database else "")
    )
    return cfg


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    return subprocess.run([exe_path(), *args], capture_output=True, text=True, timeout=60,
                          env={**base, **(env or {})}, stdin=subprocess.DEVNULL)


def urls(port: int) -> dict[str, str]:
    """The ways a person might write the URL (the password wrong, or written so the driver misreads it)."""
    here = f"127.0.0.1:{port}"
    return {
        "slash": f"postgresql://{ODD_ROLE}:Tr0ub4dor/Kangaroo@{here}/postgres",  # unencoded /
        "at": f"postgresql://{ODD_ROLE}:Wr0ngPass@Kangaroo@{here}/postgres",  # unencoded @
        "raw": f"postgresql://{ODD_ROLE}:{WRONG}@{here}/postgres",  # / @ ? all unencoded
        "query": f"postgresql://{here}/postgres?user={ODD_ROLE}&password={quote(WRONG, safe='')}",
        "encoded-key": f"postgresql://{here}/postgres?user={ODD_ROLE}&pass%77ord={quote(WRONG, safe='')}",
        "netloc": f"postgresql://{ODD_ROLE}:{quote(WRONG, safe='')}@{here}/postgres",
    }


@pytest.fixture(scope="module")
def odd_role(pg_cluster: PgCluster) -> PgCluster:
    """A role whose password is full of URL syntax (created once)."""
    import asyncio

    async def make() -> None:
        conn = await asyncpg.connect(pg_cluster.admin_url)
        try:
            if not await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname=$1", ODD_ROLE):
                await conn.execute(f"CREATE ROLE {ODD_ROLE} LOGIN CREATEDB PASSWORD '{ODD_PASSWORD}'")
        finally:
            await conn.close()

    asyncio.run(make())
    return pg_cluster


@pytest.mark.parametrize(
    ("form", "where", "reachable"),
    [
        ("slash", "config", True),
        ("at", "env", True),
        ("raw", "config", False),
        ("query", "config", True),
        ("query", "env", False),
        ("encoded-key", "env", True),
        ("encoded-key", "config", False),
        ("netloc", "env", True),
    ],
)
def test_run_never_prints_the_database_password(
    odd_role: PgCluster, tmp_path: Path, form: str, where: str, reachable: bool
) -> None:
    url = urls(odd_role.port if reachable else free_port())[form]
    env = {"PERMISSION_BOT_DATABASE_URL": url} if where == "env" else {}
    r = cli("run", "--config", str(config(tmp_path, None if where == "env" else url)), env=env)
    out = r.stdout + r.stderr
    key = "state.database (env PERMISSION_BOT_DATABASE_URL)" if where == "env" else "state.database"
    assert r.returncode == 2 and out.startswith(f"permission-bot: {key}: ") and out.count("\n") == 1, out
    assert leaked(out) == [], out
    if form in ("slash", "at", "raw"):  # read in pieces by the driver: refused before any connection
        assert "not a valid PostgreSQL URL" in out and "percent-encode" in out, out
    else:  # tried: the URL shown rebuilt, without the password
        assert f"cannot connect to postgresql://{ODD_ROLE}@127.0.0.1:" in out or (
            "cannot connect to postgresql://127.0.0.1:" in out and f"user={ODD_ROLE}" in out), out
        assert not reachable or "InvalidPasswordError" in out, out  # the server was asked, and said no


async def test_migrate_takes_the_url_from_argv_env_or_file_and_never_prints_the_password(
    odd_role: PgCluster, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    inbox = Inbox(create(f"sqlite:{state / 'inbox.sqlite3'}"))
    await inbox.open()
    await inbox.close()
    cfg = str(config(tmp_path, None))
    bad = urls(odd_role.port)
    for args, env, code in [
        (["--to", bad["slash"]], {}, 2),
        (["--to", bad["raw"]], {}, 2),
        (["--to", bad["netloc"]], {}, 1),  # reachable, the password wrong
        (["--to-env", "TARGET"], {"TARGET": bad["encoded-key"]}, 1),
        ([], {"PERMISSION_BOT_DATABASE_URL": bad["query"]}, 1),
        (["--to-env", "UNSET"], {}, 2),
    ]:
        r = cli("state", "migrate", "--config", cfg, *args, env=env)
        out = r.stdout + r.stderr
        assert r.returncode == code and out.count("\n") == 1 and leaked(out) == [], (args, out)
    name = f"odd_{os.getpid()}"
    conn = await asyncpg.connect(odd_role.admin_url)
    try:
        await conn.execute(f"CREATE DATABASE {name} OWNER {ODD_ROLE}")
    finally:
        await conn.close()
    good = f"postgresql://127.0.0.1:{odd_role.port}/{name}?user={ODD_ROLE}&pass%77ord={quote(ODD_PASSWORD, safe='')}"
    (tmp_path / "target").write_text(good + "\n")
    r = cli("state", "migrate", "--config", cfg, "--to-file", str(tmp_path / "target"), "--without-crypto")
    out = r.stdout + r.stderr
    assert r.returncode == 0 and leaked(out) == [], out
    assert f"to postgresql://127.0.0.1:{odd_role.port}/{name}?user={ODD_ROLE}" in r.stdout, r.stdout
    conn = await asyncpg.connect(good)  # what was copied is there, read with the same URL
    try:
        assert await conn.fetchval("SELECT count(*) FROM kv") >= 1
    finally:
        await conn.close()
