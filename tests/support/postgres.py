"""A real PostgreSQL cluster for the tests: one per test session (per pytest-xdist worker), from Debian's
server binaries, in a temporary folder, on a free loopback port, stopped (no process left) at the end.

initdb and postgres refuse to run as root: as root, the cluster runs as the dedicated system user
``pbtest`` (made when missing). Connections use passwords (scram-sha-256 on 127.0.0.1): the admin
``postgres`` makes one fresh database per test, owned by ``permbot``, the role the daemon would use
(no superuser: what it does, such as ending another daemon's backend, must work without one).
"""

from __future__ import annotations

import atexit
import glob
import itertools
import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from bot.demo.homeserver import free_port
from bot.inbox.db import Connection, create, fence
from bot.inbox.db.postgres import PostgresDatabase
from bot.inbox.store import Inbox

USER = "pbtest"
ADMIN_PASSWORD = "pg-admin-pw-6d1e"
APP_ROLE, APP_PASSWORD = "permbot", "pg-app-pw-93ka7x"
_names = itertools.count(1)


def bindir() -> Path:
    """The folder of initdb and postgres: ``pg_config --bindir``, else Debian's newest, else PATH."""
    found: list[Path] = []
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=False).stdout.strip()
        found.append(Path(out))
    found += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True)]
    if shutil.which("initdb"):
        found.append(Path(os.path.realpath(shutil.which("initdb") or "")).parent)
    for d in found:
        if (d / "initdb").exists() and (d / "postgres").exists():
            return d
    raise RuntimeError("PostgreSQL's server binaries (initdb, postgres) are not installed: apt-get install postgresql")


def _version(path: str) -> float:
    try:
        return float(Path(path).parent.name)
    except ValueError:
        return 0.0


def ensure_user() -> pwd.struct_passwd | None:
    """As root, the system user the cluster runs as (made when missing); None when not root."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
            capture_output=True, check=False,  # another xdist worker may make it at the same moment
        )
        return pwd.getpwnam(USER)


class PgCluster:
    """One running cluster; :meth:`create_database` gives a fresh database's URL."""

    def __init__(self, settings: tuple[str, ...] = ()) -> None:
        self.bin = bindir()
        self.user = ensure_user()
        self.dir = Path(tempfile.mkdtemp(prefix="pb-pg-"))
        self.data = self.dir / "data"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.settings = settings  # more ``name=value`` server settings (a primary's replication ones)

    def _run_as(self) -> dict[str, Any]:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "LANG": "C", "TZ": "UTC"}
        if self.user is None:
            return {"env": env}
        return {"env": env, "user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}

    def init(self) -> None:
        pwfile = self.dir / "pw"
        pwfile.write_text(ADMIN_PASSWORD + "\n")
        if self.user is not None:
            for p in (self.dir, pwfile):
                os.chown(p, self.user.pw_uid, self.user.pw_gid)
        pwfile.chmod(0o600)
        subprocess.run(
            [str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", f"--pwfile={pwfile}",
             "--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--no-locale", "--no-sync"],
            cwd=self.dir, capture_output=True, check=True, **self._run_as(),
        )

    def start(self, timeout: float = 60, port: int = 0) -> None:
        """Start the server (on ``port``: a restart keeps its URL; else a free one)."""
        for _ in range(3):  # a free port can be taken between the check and the bind
            self.port = port or free_port()
            with open(self.dir / "postgres.log", "ab") as log:  # the server keeps its own copy of the fd
                self.proc = subprocess.Popen(
                    [str(self.bin / "postgres"), "-D", str(self.data), "-p", str(self.port),
                     "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self.dir}",
                     "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
                     "-c", "max_connections=200", "-c", "shared_buffers=32MB",
                     *(a for kv in self.settings for a in ("-c", kv))],
                    cwd=self.dir, stdout=log, stderr=subprocess.STDOUT, **self._run_as(),
                )
            if self._wait_ready(timeout):
                return
        raise RuntimeError(f"postgres did not start; see {self.dir}/postgres.log")

    def _wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                return False
            ok = subprocess.run(
                [str(self.bin / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port)], check=False
            )
            if ok.returncode == 0:
                return True
            time.sleep(0.1)
        self._halt()
        return False

    def stop(self) -> None:
        """Fast shutdown (every backend ends), then the folder goes; safe to call twice."""
        self._halt()
        if not os.environ.get("PB_KEEP_TESTDIR"):
            shutil.rmtree(self.dir, ignore_errors=True)

    def _halt(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def url(self, database: str = "postgres", user: str = APP_ROLE, password: str = APP_PASSWORD) -> str:
        return f"postgresql://{user}:{password}@127.0.0.1:{self.port}/{database}"

    @property
    def admin_url(self) -> str:
        return self.url("postgres", "postgres", ADMIN_PASSWORD)

    def setup_roles(self) -> None:
        """The app role, made with psql over the cluster's own socket (sync: fixtures may run inside a loop)."""
        subprocess.run(
            [str(self.bin / "psql"), "-h", str(self.dir), "-p", str(self.port), "-U", "postgres", "-d", "postgres",
             "-v", "ON_ERROR_STOP=1", "-qc", f"CREATE ROLE {APP_ROLE} LOGIN PASSWORD '{APP_PASSWORD}'"],
            capture_output=True, check=True, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        )

    async def create_database(self) -> str:
        """A new empty database owned by the app role; its URL (with the app role's password)."""
        name = f"t{os.getpid()}_{next(_names)}"
        conn = await asyncpg.connect(self.admin_url)
        try:
            await conn.execute(f"CREATE DATABASE {name} OWNER {APP_ROLE}")
        finally:
            await conn.close()
        return self.url(name)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """The session's PostgreSQL cluster (one per xdist worker)."""
    cluster = PgCluster()
    atexit.register(cluster.stop)  # also when the session is cut short
    try:
        cluster.init()
        cluster.start()
        cluster.setup_roles()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
async def pg_url(pg_cluster: PgCluster) -> AsyncIterator[str]:
    """A fresh database for one test: its URL."""
    yield await pg_cluster.create_database()


@pytest.fixture(params=["sqlite", "postgresql"])
async def engine_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A fresh database on each engine in turn: a SQLite file, then a PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:{tmp_path / 'state' / 'inbox.sqlite3'}"
    else:
        cluster: PgCluster = request.getfixturevalue("pg_cluster")
        yield await cluster.create_database()


@pytest.fixture
async def inbox(engine_url: str) -> AsyncIterator[Inbox]:
    """An open inbox on each engine in turn (see ``engine_url``)."""
    ib = Inbox(create(engine_url))
    await ib.open()
    yield ib
    await ib.close()


@pytest.fixture
async def sqlite_inbox(tmp_path: Path) -> AsyncIterator[Inbox]:
    """An open inbox in a SQLite file in ``tmp_path``, for the tests that run on SQLite only."""
    ib = Inbox(tmp_path / "inbox.sqlite3")
    await ib.open()
    yield ib
    await ib.close()


@asynccontextmanager
async def daemons_on(url: str, *holders: str) -> AsyncIterator[list[PostgresDatabase]]:
    """One started ``PostgresDatabase`` per holder name, all on ``url`` (several daemons), stopped after."""
    dbs: list[PostgresDatabase] = []
    try:
        for holder in holders:
            db = create(url, holder=holder)
            assert isinstance(db, PostgresDatabase)
            await db.start()
            dbs.append(db)
        yield dbs
    finally:
        for db in dbs:
            await db.stop()


async def kv_value(url: str, key: str) -> Any:
    """A key/value entry of the database at ``url``, read as a test would (JSON decoded; None when absent)."""
    conn = await asyncpg.connect(url)
    try:
        v = await conn.fetchval("SELECT v FROM kv WHERE k=$1", key)
    finally:
        await conn.close()
    return json.loads(v) if v is not None else None


async def check_term(conn: Connection, term: int) -> None:
    """A leader's write check, in ``conn``'s transaction, as a fenced transaction makes it: Deposed unless ``term``
    is still the current one (bot.inbox.db.fence.check with this context's fence at ``term``)."""
    token = fence.FENCE.set(fence.Fence(term))
    try:
        await fence.check(conn)
    finally:
        fence.FENCE.reset(token)
