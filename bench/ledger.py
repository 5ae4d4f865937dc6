"""The ledger's costs (issue 37).

    .venv/bin/python bench/ledger.py [--entries 100000] [--settles 2000] [--latency [--rounds 40] [--pairs 2]]

1. What an append adds to a settlement: ``Inbox.settle`` timed with the ledger and without it
   (``PERMISSION_BOT_BENCH_NO_LEDGER=1``), alternating blocks, on SQLite (the inbox's engine by default).
   ``--latency``: also bench/latency.py run with and without the ledger, alternating (each run starts its own
   Synapse), and the ratio of their product medians (target: at most 1.05).
2. ``permission-bot audit export`` of ``--entries`` entries: the peak RSS of the process, against the same
   export of a tenth of them (constant memory: about the same).
3. ``permission-bot audit verify FILE`` of that export: entries per second (target: at least 50,000).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.events.ledger import ZERO, line, seal  # noqa: E402
from bot.events.states import Via  # noqa: E402
from bot.inbox import ledger  # noqa: E402
from bot.inbox.record import Settlement  # noqa: E402
from bot.inbox.store import Inbox  # noqa: E402
from bot.inbox.submission import parse_submission  # noqa: E402
from tests.support.station import exe_path, request_body  # noqa: E402

CONFIG = """[matrix]
homeserver = "http://127.0.0.1:9"
user_id = "@bench:example.org"
password = "bench-password"
room = "!bench:example.org"
[answerers]
users = ["@alice:example.org"]
[state]
path = "{state}"
"""


async def settle_block(inbox: Inbox, n: int, tag: str) -> float:
    """ms per settle of ``n`` fresh requests."""
    recs = [(await inbox.submit(parse_submission(request_body(f"{tag}-{i}")), 1.0, 600))[0] for i in range(n)]
    t0 = time.perf_counter()
    for r in recs:
        await inbox.settle(r.id, Settlement("allow_once", "@a:x", Via.MATRIX, 2.0))
    return (time.perf_counter() - t0) * 1000 / n


async def settle_cost(work: Path, settles: int) -> None:
    inbox = Inbox(work / "settle.sqlite3")
    await inbox.open()
    on, off = [], []
    try:
        for b in range(6):
            if b % 2:
                os.environ[ledger.OFF_ENV] = "1"
                off.append(await settle_block(inbox, settles // 6, f"off{b}"))
            else:
                os.environ.pop(ledger.OFF_ENV, None)
                on.append(await settle_block(inbox, settles // 6, f"on{b}"))
    finally:
        os.environ.pop(ledger.OFF_ENV, None)
        await inbox.close()
    m_on, m_off = statistics.median(on), statistics.median(off)
    print(f"settle (SQLite): {m_on:.3f} ms with the ledger, {m_off:.3f} ms without: "
          f"+{m_on - m_off:.3f} ms a settlement")


def latency_runs(rounds: int, pairs: int) -> None:
    meds: dict[str, list[float]] = {"on": [], "off": []}
    for _ in range(pairs):
        for mode in ("off", "on"):
            env = dict(os.environ)
            if mode == "off":
                env[ledger.OFF_ENV] = "1"
            out = subprocess.run([sys.executable, str(ROOT / "bench/latency.py"), "--rounds", str(rounds),
                                  "--blocks", "2"], capture_output=True, text=True, env=env, timeout=1800)
            found = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
            if out.returncode != 0 or not found:
                print(f"latency run failed ({mode}):\n{out.stderr[-2000:]}")
                return
            meds[mode].append(float(found[-1]["product_median_ms"]))
            print(f"latency.py, ledger {mode}: product median {meds[mode][-1]:.1f} ms")
    on, off = statistics.median(meds["on"]), statistics.median(meds["off"])
    print(f"latency: product median {on:.1f} ms with the ledger, {off:.1f} ms without: ratio {on / off:.3f} "
          "(target <= 1.05)")


def make_state(state: Path, n: int) -> None:
    """A state folder whose inbox holds a ledger of ``n`` entries (written directly, in one transaction)."""

    async def schema() -> None:
        inbox = Inbox(state / "inbox.sqlite3")
        await inbox.open()
        await inbox.close()

    state.mkdir(parents=True)
    asyncio.run(schema())
    db = sqlite3.connect(state / "inbox.sqlite3")
    prev, rows = ZERO, []
    for seq in range(1, n + 1):
        at = 1_700_000_000.0 + seq
        e = seal({"at": "2026-01-01T00:00:00.000Z", "request_id": f"s{seq % 97}:{seq}", "room": "default",
                  "kind": "permission", "digest": "sha256:" + "ab" * 32, "revision": 1, "option_id": "allow_once",
                  "meaning": "approve", "scope": "once", "answered_by": ["@alice:example.org"], "via": "matrix",
                  "feedback": None}, seq, prev)
        prev = e["hash"]
        rows.append((seq, at, "default", e["request_id"], prev, line(e)))
    db.executemany("INSERT INTO ledger (seq, at, room, request_id, hash, entry) VALUES (?,?,?,?,?,?)", rows)
    db.execute("UPDATE ledger_head SET seq=?, hash=? WHERE id=1", (n, prev))
    db.commit()
    db.close()


def rss_of(args: list[str], out: Path) -> tuple[float, float]:
    """(seconds, peak RSS in MiB) of one command run alone, its stdout into ``out``."""
    code = (
        "import resource, subprocess, sys, time; t = time.perf_counter();"
        f"r = subprocess.run({args!r}, stdout=open({str(out)!r}, 'w'));"
        "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.returncode)"
    )
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert got[2] == "0", f"{args} failed"
    return float(got[0]), int(got[1]) / 1024


def export_and_verify(work: Path, n: int) -> None:
    exe = exe_path()
    for count in (n // 10, n):
        where = work / f"x{count}"
        make_state(where / "state", count)
        cfg = where / "config.toml"
        cfg.write_text(CONFIG.format(state=where / "state"))
        dump = where / "ledger.jsonl"
        secs, rss = rss_of([exe, "audit", "export", "--config", str(cfg)], dump)
        lines = sum(1 for _ in open(dump))
        print(f"audit export of {count:,} entries: {secs:.2f} s, peak RSS {rss:.1f} MiB ({lines:,} lines, "
              f"{dump.stat().st_size / 1e6:.1f} MB)")
        t0 = time.perf_counter()
        out = subprocess.run([exe, "audit", "verify", str(dump)], capture_output=True, text=True)
        secs = time.perf_counter() - t0
        assert out.returncode == 0, out.stderr
        m = re.search(r"intact: (\d+) entries", out.stdout)
        assert m and int(m.group(1)) == count
        print(f"audit verify of {count:,} entries: {secs:.2f} s wall (process start included), "
              f"{count / secs:,.0f} entries/s")
        t0 = time.perf_counter()
        out = subprocess.run([exe, "audit", "verify", "--config", str(cfg)], capture_output=True, text=True)
        secs = time.perf_counter() - t0
        assert out.returncode == 0, out.stderr
        print(f"audit verify (from the state) of {count:,} entries: {secs:.2f} s, {count / secs:,.0f} entries/s")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--settles", type=int, default=2400)
    ap.add_argument("--latency", action="store_true", help="also bench/latency.py with and without the ledger")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--pairs", type=int, default=2)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pb-ledger-") as d:
        work = Path(d)
        asyncio.run(settle_cost(work, a.settles))
        export_and_verify(work, a.entries)
    if a.latency:
        latency_runs(a.rounds, a.pairs)
    print(f"(this process's own peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
