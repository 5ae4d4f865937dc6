"""Backlog (issue 35): what a large inbox costs the daemon, each figure a ratio to an empty inbox in the same run.

    .venv/bin/python bench/backlog.py [--pending 10000] [--unposted 5000] [--runs 5]

Real Synapse on loopback and the daemon as a subprocess (tests/support's Station), on SQLite (``--postgres``:
PostgreSQL, tests/support's cluster, each inbox a template database). The inboxes are
made while the daemon is stopped, as copies of one empty inbox that already synced the room (same session,
same sync token, so every start does the same Matrix work): ``empty``; ``full``, with ``--pending`` requests
pending and their prompts in the room (their event ids made up; nothing left to post, seed or edit); and
``backlog``, with ``--unposted`` requests whose prompts are not posted yet (as after an outage or a
take-over). Each start gets a fresh copy. Figures (median and p90; target in brackets):

- new request: submit -> its prompt posted (the record names its event), one at a time, on ``empty`` and
  on ``backlog`` just after the start (the daemon busy posting the backlog) [backlog <= 2x empty, or 2 s];
- start-up: process start -> ``/healthz`` matrix_ready, and peak RSS (VmHWM) 3 s after, ``empty`` and
  ``full`` alternately [full <= 1.2x empty, both];
- ``permission-bot permissions ls > /dev/null`` against each started daemon [full <= 3x empty];
- a request a config rule settles: bot events about it in the room (a synced client's view) [exactly 1],
  and submit -> posted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.demo.homeserver import Homeserver  # noqa: E402
from bot.inbox.db import create  # noqa: E402
from bot.inbox.store import Inbox  # noqa: E402
from bot.inbox.submission import parse_submission  # noqa: E402
from tests.support.human import content  # noqa: E402
from tests.support.station import TOKEN, Station, request_body  # noqa: E402

DAY = 86400.0
RULE = '\n[[rules]]\nmatch = { toolName = "Read*" }\ndecision = "approve"\n'


def pct(xs: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank)."""
    return sorted(xs)[max(0, min(len(xs), round(q * len(xs))) - 1)]


def line(name: str, xs: list[float], unit: str = "ms", scale: float = 1000.0) -> str:
    return f"  {name:<34} median {statistics.median(xs) * scale:8.1f} {unit}   p90 {pct(xs, 0.9) * scale:8.1f} {unit}" \
           f"   (n={len(xs)})"


async def fill(where: Path | str, n: int, posted: bool) -> None:
    """Add ``n`` pending requests (1,000 sessions) to the inbox at ``where`` (a SQLite file or a PostgreSQL URL),
    in one transaction; ``posted``: their prompts are in the room (made-up event ids, keycaps seeded)."""
    inbox = Inbox(where if isinstance(where, Path) else create(where))
    await inbox.open()
    now = time.time()
    async with inbox.database.transaction() as db:
        for i in range(n):
            sub = parse_submission(request_body(f"bl{i % 1000}", tool_call_id=f"c{i}", command=f"make t{i}"))
            await inbox.insert(db, sub, now + i * 1e-4, DAY)
        if posted:
            await db.execute("UPDATE requests SET prompt_event_id='$bench-' || id, posted_at=$1, seeded=1", now)
    await inbox.close()


def rss_peak_mb(pid: int) -> float:
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith("VmHWM:"):
            return int(row.split()[1]) / 1024
    return float("nan")


class PgInboxes:
    """The same on PostgreSQL: each inbox a template database, each start a fresh copy (``live``)."""

    def __init__(self, pg: Any, st: Station) -> None:
        self.pg, self.st = pg, st

    async def admin(self, sql: str) -> None:
        import asyncpg

        conn = await asyncpg.connect(self.pg.admin_url)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    async def save(self, name: str, source: str | None = None) -> str:
        """Inbox ``name`` (database ``pb_NAME``), a copy of inbox ``source`` (default: the live database)."""
        await self.admin(f"CREATE DATABASE pb_{name} TEMPLATE {'live' if source is None else 'pb_' + source}"
                         " OWNER permbot")
        return str(self.pg.url(f"pb_{name}"))

    async def use(self, name: str) -> None:
        await self.admin("DROP DATABASE IF EXISTS live WITH (FORCE)")
        await self.admin(f"CREATE DATABASE live TEMPLATE pb_{name} OWNER permbot")
        import asyncpg

        conn = await asyncpg.connect(self.pg.url("live"))
        try:
            await conn.execute("UPDATE kv SET v=$1 WHERE k='install_id'", uuid.uuid4().hex)
        finally:
            await conn.close()


class Bench:
    def __init__(self, st: Station, work: Path, pg: PgInboxes | None = None) -> None:
        self.pg = pg
        self.st = st
        self.db = st.state_dir / "inbox.sqlite3"
        self.saved = work / "inboxes"
        self.saved.mkdir()
        self.env = dict(os.environ, PERMISSION_BOT_URL=st.api_url, PERMISSION_BOT_TOKEN=TOKEN)

    def stop(self, graceful: bool = False) -> None:
        """Stop the daemon; a killed one's WAL goes too (the next start copies a fresh inbox over the file)."""
        self.st.stop_daemon() if graceful else self.st.kill_daemon()
        for suffix in ("-wal", "-shm"):
            Path(f"{self.db}{suffix}").unlink(missing_ok=True)

    def use(self, name: str) -> None:
        """A fresh copy of inbox ``name``, with an install id of its own: txn ids never repeat an earlier
        run's, so the homeserver never answers a send from its transaction cache (that would be free)."""
        shutil.copy(self.saved / name, self.db)
        db = sqlite3.connect(self.db)
        try:
            with db:
                db.execute("UPDATE kv SET v=? WHERE k='install_id'", (uuid.uuid4().hex,))
        finally:
            db.close()  # none left open: the next copy goes over this file

    async def start(self, name: str) -> tuple[float, float]:
        """Start on a fresh copy of inbox ``name``: (seconds to matrix_ready, peak RSS MB 3 s later)."""
        self.stop()
        await self.pg.use(name) if self.pg else self.use(name)
        t = time.perf_counter()
        self.st.start_daemon()
        await self.st.wait_healthy(120)
        ready = time.perf_counter() - t
        await asyncio.sleep(3)
        assert self.st.daemon is not None
        return ready, rss_peak_mb(self.st.daemon.pid)

    def ls(self) -> float:
        t = time.perf_counter()
        subprocess.run([self.st.exe, "permissions", "ls"], env=self.env, stdout=subprocess.DEVNULL, check=True,
                       stdin=subprocess.DEVNULL, timeout=120)
        return time.perf_counter() - t

    async def new_request(self, tag: str, i: int, kind: str = "execute") -> tuple[float, str]:
        """Submit one request and wait until its prompt is posted: (seconds, request id)."""
        body = request_body(f"new_{tag}_{i}", kind=kind, title="Read README.md" if kind == "read" else "Run it")
        if kind == "read":
            body["toolCall"]["_meta"] = {"claudeCode": {"toolName": "Read"}}
        t = time.perf_counter()
        code, rec = await self.st.ahttp("POST", "/permissions", body)
        assert code == 201, rec
        while True:
            code, got = await self.st.ahttp("GET", f"/permissions/{rec['id']}")
            if got.get("prompt_event_id"):
                return time.perf_counter() - t, rec["id"]
            if time.perf_counter() - t > 120:
                raise SystemExit(f"{rec['id']} not posted in 120 s")
            await asyncio.sleep(0.01)


async def requests_part(a: argparse.Namespace, b: Bench, st: Station, new: dict[str, list[float]],
                        ruled: list[float], events: list[int]) -> None:
    """A new request on the empty inbox, then with the backlog being posted; a rule-settled request."""
    # a new request: on the empty inbox, then with the backlog being posted
    for name in ("empty", "backlog"):
        for run in range(a.runs // 2 + 1):
            await b.start(name)
            for i in range(4):
                took, _ = await b.new_request(f"{name}{run}", i)
                new[name].append(took)
                await asyncio.sleep(0.3)
    # a rule-settled request: one event
    st.extra_config = RULE
    st.write_config()
    await b.start("empty")
    for i in range(5):
        took, rid = await b.new_request("rule", i, kind="read")
        ruled.append(took)
        await asyncio.sleep(1.5)  # an edit, were one to follow, would be in by now
        events.append(sum(1 for e in st.alice.events if e.get("sender") == st.bot_id and rid in (
            content(e).get("request_id"), content(e).get("m.new_content", {}).get("request_id"))))
    b.stop()


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pending", type=int, default=10_000)
    ap.add_argument("--unposted", type=int, default=5_000)
    ap.add_argument("--runs", type=int, default=5, help="starts of each inbox; new requests: 2x this")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--ls-only", action="store_true",
                    help="only the start-ups and `ls` (no backlog inbox, no new or rule-settled requests)")
    ap.add_argument("--postgres", action="store_true", help="the inbox in PostgreSQL (tests/support's cluster)")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pb-backlog-"))
    hs = Homeserver(work / "synapse", overrides={"bcrypt_rounds": 4})
    hs.start()
    st = Station(hs, work / "station")
    results: list[tuple[str, bool]] = []
    cluster = None
    try:
        pgi = None
        if a.postgres:
            from tests.support.postgres import PgCluster

            cluster = PgCluster()
            cluster.init()
            cluster.start()
            cluster.setup_roles()
            pgi = PgInboxes(cluster, st)
            await pgi.admin("CREATE DATABASE live OWNER permbot")
            st.env["PERMISSION_BOT_DATABASE_URL"] = cluster.url("live")
        await st.setup()  # the daemon syncs the room once: the empty inbox keeps that sync token
        b = Bench(st, work, pgi)
        b.stop(graceful=True)  # its WAL checkpointed into the file
        inboxes = [("full", a.pending, True)] + ([] if a.ls_only else [("backlog", a.unposted, False)])
        if pgi is not None:
            await pgi.save("empty")
            for name, n, posted in inboxes:
                await fill(await pgi.save(name, "empty"), n, posted)
        else:
            shutil.copy(b.db, b.saved / "empty")
            for name, n, posted in inboxes:
                shutil.copy(b.saved / "empty", b.saved / name)
                await fill(b.saved / name, n, posted)
        print(f"work dir {work}; inboxes made: {a.pending} pending, {a.unposted} unposted", flush=True)

        # start-up, RSS and ls, empty and full alternately
        ready: dict[str, list[float]] = {"empty": [], "full": []}
        rss: dict[str, list[float]] = {"empty": [], "full": []}
        ls: dict[str, list[float]] = {"empty": [], "full": []}
        for _ in range(a.runs):
            for name in ("empty", "full"):
                r, m = await b.start(name)
                ready[name].append(r)
                rss[name].append(m)
                ls[name] += [b.ls(), b.ls()]
        new: dict[str, list[float]] = {"empty": [], "backlog": []}
        ruled: list[float] = []
        events: list[int] = []
        if not a.ls_only:
            await requests_part(a, b, st, new, ruled, events)
        engine = "PostgreSQL" if a.postgres else "SQLite"
        print(f"\nbacklog bench, {engine}, real Synapse; {a.pending} pending / {a.unposted} unposted")
        print(line("start-up, empty inbox", ready["empty"]))
        print(line(f"start-up, {a.pending} pending", ready["full"]))
        print(line("peak RSS, empty inbox", rss["empty"], "MB", 1.0))
        print(line(f"peak RSS, {a.pending} pending", rss["full"], "MB", 1.0))
        print(line("ls > /dev/null, empty inbox", ls["empty"]))
        print(line(f"ls > /dev/null, {a.pending} pending", ls["full"]))
        if not a.ls_only:
            print(line("new request posted, empty inbox", new["empty"]))
            print(line(f"new request posted, {a.unposted} unposted", new["backlog"]))
            print(line("rule-settled request posted", ruled))
            print(f"  bot events per rule-settled request: {events}")

        def ratio(name: str, xs: list[float], ys: list[float], most: float, floor: float = 0.0) -> None:
            r = statistics.median(ys) / statistics.median(xs)
            ok = r <= most or statistics.median(ys) <= floor
            results.append((name, ok))
            also = f" or <= {floor:g} s" if floor else ""
            p90 = pct(ys, 0.9) / pct(xs, 0.9)
            print(f"  {'PASS' if ok else 'FAIL'} {name}: {r:.2f}x (p90s: {p90:.2f}x; target <= {most:g}x{also})")

        print("\nratios of medians (to the empty inbox):")
        ratio("start-up", ready["empty"], ready["full"], 1.2)
        ratio("peak RSS", rss["empty"], rss["full"], 1.2)
        ratio("ls", ls["empty"], ls["full"], 3.0)
        if not a.ls_only:
            ratio("new request with a backlog", new["empty"], new["backlog"], 2.0, floor=2.0)
            one = all(n == 1 for n in events)
            results.append(("rule-settled is one event", one))
            print(f"  {'PASS' if one else 'FAIL'} rule-settled request: one event each")
        return 0 if all(ok for _, ok in results) else 1
    finally:
        await st.teardown()
        hs.stop()
        if cluster is not None:
            cluster.stop()
        if a.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
