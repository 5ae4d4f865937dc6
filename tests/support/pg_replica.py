"""A PostgreSQL primary and its streaming replica for the tests (issue 36): the replica made with
``pg_basebackup -R`` from the running primary, replication synchronous (a commit waits for the replica:
nothing the primary confirmed is lost when it dies), the primary killed (``pg_ctl stop -m immediate``)
and the replica promoted (``pg_ctl promote``); and a plain restart of one server on its own port.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.support.postgres import ADMIN_PASSWORD, APP_PASSWORD, APP_ROLE, PgCluster

PRIMARY_SETTINGS = (
    "synchronous_commit=on", "full_page_writes=on", "wal_level=replica", "max_wal_senders=5", "hot_standby=on",
    "wal_keep_size=64MB",
)  # synchronous_standby_names is set once the replica streams (before, every commit would wait for it)


def restart(cluster: PgCluster, down_for: float) -> None:
    """Stop ``cluster`` (fast: every backend ended), wait ``down_for`` seconds, start it on the same port."""
    port = cluster.port
    cluster._halt()
    time.sleep(down_for)
    cluster.start(port=port)


def signal_server(cluster: PgCluster, sig: signal.Signals) -> None:
    """``sig`` to the server and every backend of it (SIGSTOP: connections stay open, nothing answers)."""
    assert cluster.proc is not None
    pids = [cluster.proc.pid]
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pids[0]:
                pids.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    for pid in pids:
        os.kill(pid, sig)


def stop_immediately(cluster: PgCluster) -> None:
    """``pg_ctl stop -m immediate``: the server dies as in a crash (no checkpoint, backends cut)."""
    subprocess.run(
        [str(cluster.bin / "pg_ctl"), "stop", "-D", str(cluster.data), "-m", "immediate", "-w"],
        capture_output=True, check=False, cwd=cluster.dir, **cluster._run_as(),
    )
    if cluster.proc is not None:
        try:
            cluster.proc.wait(30)
        except subprocess.TimeoutExpired:
            cluster.proc.send_signal(signal.SIGKILL)
            cluster.proc.wait()
    cluster.proc = None


class Replica(PgCluster):
    """A streaming replica of ``primary``: its data folder a base backup (``-R``: it follows the primary)."""

    def __init__(self, primary: PgCluster) -> None:
        super().__init__(("hot_standby=on", "synchronous_commit=on", "full_page_writes=on",
                          "wal_retrieve_retry_interval=200ms"))  # back soon after the primary restarts
        self.primary = primary

    def init(self) -> None:
        env = {**self._run_as()["env"], "PGPASSWORD": ADMIN_PASSWORD}
        if self.user is not None:
            os.chown(self.dir, self.user.pw_uid, self.user.pw_gid)
        subprocess.run(
            [str(self.bin / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(self.primary.port), "-U", "postgres",
             "-D", str(self.data), "-R", "-X", "stream", "--checkpoint=fast", "--no-sync"],
            cwd=self.dir, capture_output=True, check=True, **{**self._run_as(), "env": env},
        )

    def promote(self) -> None:
        """``pg_ctl promote``: the replica becomes a primary that takes writes (waits until it does)."""
        subprocess.run(
            [str(self.bin / "pg_ctl"), "promote", "-D", str(self.data), "-w", "-t", "60"],
            capture_output=True, check=True, cwd=self.dir, **self._run_as(),
        )

    def setup_roles(self) -> None:  # replicated from the primary
        pass


class Pair:
    """A primary and its synchronous replica, both running; :meth:`url` names both hosts."""

    def __init__(self) -> None:
        self.primary = PgCluster(PRIMARY_SETTINGS)
        self.replica = Replica(self.primary)
        atexit.register(self.stop)  # also when the session is cut short
        try:
            self.primary.init()
            self.primary.start()
            self.primary.setup_roles()
            self.replica.init()
            self.replica.start()
            self._synchronous()
        except BaseException:
            self.stop()
            raise

    def _synchronous(self) -> None:
        """Once the replica streams, the primary's commits wait for it."""
        deadline = time.monotonic() + 60
        while not replicated(self) and time.monotonic() < deadline:
            time.sleep(0.1)
        psql(self.primary, "ALTER SYSTEM SET synchronous_standby_names = '*'")
        psql(self.primary, "SELECT pg_reload_conf()")

    def follow_promoted(self) -> None:
        """After the primary was lost and the replica promoted: a new replica of the new primary, on the old
        primary's port (the two-host URL names both again), and the roles swapped."""
        port, old = self.primary.port, self.primary
        old.stop()
        self.primary, self.replica = self.replica, Replica(self.replica)
        self.replica.init()
        self.replica.start(port=port)
        self._synchronous()

    def url(self, database: str) -> str:
        """Both hosts, primary first; no ``target_session_attrs``: read-write, as libpq's form says."""
        hosts = f"127.0.0.1:{self.primary.port},127.0.0.1:{self.replica.port}"
        return f"postgresql://{APP_ROLE}:{APP_PASSWORD}@{hosts}/{database}"

    async def create_database(self) -> str:
        """A fresh database made on the primary (replicated): its two-host URL."""
        url = await self.primary.create_database()
        return self.url(url.rsplit("/", 1)[1])

    def stop(self) -> None:
        for c in (self.replica, self.primary):
            c.stop()

    @property
    def dirs(self) -> list[Path]:
        return [self.primary.dir, self.replica.dir]


def psql(cluster: PgCluster, sql: str) -> str:
    """One statement as the admin over the cluster's socket; its output ('' when the server is down)."""
    out = subprocess.run(
        [str(cluster.bin / "psql"), "-h", str(cluster.dir), "-p", str(cluster.port), "-U", "postgres",
         "-d", "postgres", "-Atc", sql],
        capture_output=True, text=True, check=False, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    return out.stdout.strip()


def replicated(pair: Pair) -> bool:
    """Whether the replica is streaming from the primary (a test waits for it before killing the primary)."""
    return psql(pair.primary, "SELECT count(*) FROM pg_stat_replication WHERE state='streaming'") == "1"
