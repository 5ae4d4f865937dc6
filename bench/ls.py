"""Benchmark: `permission-bot permissions ls` over a full inbox.

Starts the real stack the way the tests do (tests/support: a Synapse on 127.0.0.1 and the daemon
as a subprocess), submits N pending requests (default 1,000, spread over 10 sessions), then times,
each over several runs, in the same process and against the same daemon:

- ``python -c pass``                  interpreter start (the floor for any CLI),
- ``GET /permissions`` in-process     the daemon's own answer time (urllib, no process start),
- ``curl-equivalent``                 a process that GETs /permissions with urllib and reads it,
- ``permission-bot permissions ls``   and ``ls --json``, through the console script,
- ``python -m bot.cli.permissions ls`` the same verb without the top-level CLI's imports.

It prints medians, the ratios to the curl-equivalent, and PASS/FAIL for the target (ls < 1 s).
Run from the project root:  .venv/bin/python bench/ls.py [--n 1000] [--runs 7] [--keep]
Needs: the venv's synapse (matrix-synapse) and the installed console script (pip install -e .).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.homeserver import Homeserver  # noqa: E402
from tests.support.station import Station, request_body  # noqa: E402

TARGET = 1.0  # seconds, for `ls` with N pending requests


def timed(cmd: list[str], env: dict[str, str], runs: int) -> tuple[float, int]:
    """Median wall time of ``cmd`` over ``runs`` (after one warm-up), and the last stdout size."""
    size = 0
    times = []
    for i in range(runs + 1):
        t = time.perf_counter()
        r = subprocess.run(cmd, env=env, capture_output=True, stdin=subprocess.DEVNULL, timeout=120)
        dt = time.perf_counter() - t
        if r.returncode != 0:
            raise SystemExit(f"{cmd} exited {r.returncode}: {r.stderr.decode(errors='replace')[-400:]}")
        size = len(r.stdout)
        if i:
            times.append(dt)
    return statistics.median(times), size


def timed_inproc(station: Station, runs: int) -> tuple[float, int]:
    times = []
    n = 0
    for _ in range(runs):
        t = time.perf_counter()
        status, body = station.http("GET", "/permissions", token=None)
        times.append(time.perf_counter() - t)
        assert status == 200, status
        n = len(body)
    return statistics.median(times), n


def submit_all(station: Station, n: int, sessions: int) -> float:
    def one(i: int) -> None:
        sid = f"bench_{i % sessions}"
        body = request_body(
            sid,
            title=("Bash", "Write", "Read", "Edit")[i % 4],
            command=f"echo request {i} && " + "make -j8 test " * (i % 7),
            tool_call_id=f"call_{i}",
        )
        body["label"] = f"agent-{i % sessions}"
        status, rec = station.http("POST", "/permissions", body)
        if status not in (200, 201):
            raise SystemExit(f"submit {i} answered {status}: {rec}")

    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(one, range(n)))
    return time.perf_counter() - t


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="pending requests to submit (default 1000)")
    ap.add_argument("--sessions", type=int, default=10)
    ap.add_argument("--runs", type=int, default=7, help="timed runs per command (median reported)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="pb-bench-"))
    hs = Homeserver(work / "synapse")
    station = Station(hs, work / "station")
    print(f"work dir {work}; starting Synapse and the daemon …", flush=True)
    hs.start()
    try:
        await station.setup()
        took = submit_all(station, args.n, args.sessions)
        status, pending = station.http("GET", "/permissions", token=None)
        assert status == 200
        print(f"submitted {args.n} requests in {took:.1f}s; {len(pending)} pending", flush=True)
        if len(pending) < args.n:
            raise SystemExit("fewer pending requests than submitted")

        env = dict(os.environ, PERMISSION_BOT_URL=station.api_url, PERMISSION_BOT_TOKEN=station.token)
        py = sys.executable
        curl = (
            "import sys, urllib.request; "
            "sys.stdout.buffer.write(urllib.request.urlopen(sys.argv[1] + '/permissions').read())"
        )
        rows: list[tuple[str, float, Any]] = []
        rows.append(("python -c pass", *timed([py, "-c", "pass"], env, args.runs)))
        rows.append(("GET /permissions in-process", *timed_inproc(station, args.runs)))
        base, size = timed([py, "-c", curl, station.api_url], env, args.runs)
        rows.append(("curl-equivalent (urllib process)", base, size))
        ls, ls_size = timed([station.exe, "permissions", "ls"], env, args.runs)
        rows.append(("permission-bot permissions ls", ls, ls_size))
        lj, lj_size = timed([station.exe, "permissions", "ls", "--json"], env, args.runs)
        rows.append(("permission-bot permissions ls --json", lj, lj_size))
        rows.append(
            (
                "python -m bot.cli.permissions ls",
                *timed([py, "-m", "bot.cli.permissions", "ls"], env, args.runs),
            )
        )

        print(f"\nmedians over {args.runs} runs, {len(pending)} pending requests:")
        for name, t, extra in rows:
            unit = "records" if "in-process" in name else "bytes out"
            print(f"  {name:<40} {t * 1000:8.1f} ms   ({extra} {unit})")
        print(f"\n  ls / curl-equivalent        = {ls / base:5.2f}x")
        print(f"  ls --json / curl-equivalent = {lj / base:5.2f}x")
        ok = ls < TARGET and lj < TARGET
        print(f"\n{'PASS' if ok else 'FAIL'}: ls {ls:.3f}s, ls --json {lj:.3f}s (target < {TARGET:.0f} s)")
        return 0 if ok else 1
    finally:
        await station.teardown()
        hs.stop()
        if args.keep:
            print(f"kept {work}")
        else:
            import shutil

            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
