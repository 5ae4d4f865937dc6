"""Benchmark: `permission-bot permissions ls` over a full inbox.

Starts the real stack the way the tests do (bot.demo.homeserver's Synapse on 127.0.0.1 and
tests/support's Station: the daemon as a subprocess), submits N pending requests (default 10,000,
spread over 1,000 sessions), then times, round-robin over several runs (so background load, such as
the daemon still posting prompts, falls on every command alike), against the same daemon:

- ``python -c pass``                  interpreter start (the floor for any CLI),
- ``GET /permissions`` in-process     the daemon's own answer time (urllib, no process start),
  and one page of it (``?limit=100``): its cost is the page's, not the inbox's,
- ``curl-equivalent``                 a process that GETs /permissions with urllib and reads it,
- ``permission-bot permissions ls``   and ``ls --json``, through the console script,
- ``python -m bot.cli.permissions ls`` the same verb without the top-level CLI's imports.

It prints medians, the ratios to the curl-equivalent, and PASS/FAIL for the target (ls < 1 s).
Run from the project root:  .venv/bin/python bench/ls.py [--n 10000] [--runs 7] [--keep]
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
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

try:
    from bot.demo.homeserver import Homeserver
except ImportError:  # its earlier home
    from tests.support.homeserver import Homeserver  # type: ignore[no-redef]
from tests.support.station import Station, request_body  # noqa: E402

TARGET = 1.0  # seconds, for `ls` with N pending requests


def timed(cmds: dict[str, list[str]], env: dict[str, str], runs: int) -> dict[str, tuple[float, int]]:
    """Median wall time of each command over ``runs`` rounds (after one warm-up round), and its stdout size."""
    times: dict[str, list[float]] = {name: [] for name in cmds}
    size: dict[str, int] = {}
    for i in range(runs + 1):
        for name, cmd in cmds.items():
            t = time.perf_counter()
            r = subprocess.run(cmd, env=env, capture_output=True, stdin=subprocess.DEVNULL, timeout=120)
            dt = time.perf_counter() - t
            if r.returncode != 0:
                raise SystemExit(f"{cmd} exited {r.returncode}: {r.stderr.decode(errors='replace')[-400:]}")
            size[name] = len(r.stdout)
            if i:
                times[name].append(dt)
    return {name: (statistics.median(ts), size[name]) for name, ts in times.items()}


def timed_inproc(station: Station, runs: int, query: str = "") -> tuple[float, int]:
    times = []
    n = 0
    for _ in range(runs):
        t = time.perf_counter()
        status, body = station.http("GET", "/permissions" + query)
        times.append(time.perf_counter() - t)
        assert status == 200, status
        n = len(body)
    return statistics.median(times), n


def posted(station: Station) -> float:
    """How many prompts the daemon has posted (permission_bot_prompts_posted_total)."""
    req = urllib.request.Request(station.api_url + "/metrics", headers={"Authorization": f"Bearer {station.token}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        text = r.read().decode()
    return next((float(line.split()[1]) for line in text.splitlines()
                 if line.startswith("permission_bot_prompts_posted_total ")), 0.0)


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
    ap.add_argument("--n", type=int, default=10_000, help="pending requests to submit (default 10,000)")
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=7, help="timed runs per command (median reported)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--no-wait", action="store_true",
                    help="time at once, while the daemon is still posting (a busier daemon; a shorter run)")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="pb-bench-"))
    hs = Homeserver(work / "synapse")
    station = Station(hs, work / "station")
    print(f"work dir {work}; starting Synapse and the daemon …", flush=True)
    hs.start()
    try:
        await station.setup()
        took = submit_all(station, args.n, args.sessions)
        status, pending = station.http("GET", "/permissions")
        assert status == 200
        print(f"submitted {args.n} requests in {took:.1f}s; {len(pending)} pending", flush=True)
        if len(pending) < args.n:
            listed = {r["id"] for r in pending}
            gone = [f"bench_{i % args.sessions}:{i // args.sessions + 1}" for i in range(args.n)]
            for rid in [g for g in gone if g not in listed][:5]:
                print("not pending:", rid, station.http("GET", f"/permissions/{rid}")[1], flush=True)
            raise SystemExit("fewer pending requests than submitted")
        # time the steady state: wait (bounded) until the daemon has posted every prompt
        t = time.perf_counter()
        while time.perf_counter() - t < 1800 and not args.no_wait:
            if posted(station) >= args.n:  # the daemon's own counter: polling the whole list would load it
                break
            await asyncio.sleep(1)
        print(f"prompts posted after {time.perf_counter() - t:.1f}s more", flush=True)

        env = dict(os.environ, PERMISSION_BOT_URL=station.api_url, PERMISSION_BOT_TOKEN=station.token)
        py = sys.executable
        curl = (
            "import os, sys, urllib.request; "
            "r = urllib.request.Request(sys.argv[1] + '/permissions', "
            "headers={'Authorization': 'Bearer ' + os.environ['PERMISSION_BOT_TOKEN']}); "
            "sys.stdout.buffer.write(urllib.request.urlopen(r).read())"
        )
        got = timed(
            {
                "python -c pass": [py, "-c", "pass"],
                "curl-equivalent (urllib process)": [py, "-c", curl, station.api_url],
                "permission-bot permissions ls": [station.exe, "permissions", "ls"],
                "permission-bot permissions ls --json": [station.exe, "permissions", "ls", "--json"],
                "python -m bot.cli.permissions ls": [py, "-m", "bot.cli.permissions", "ls"],
            },
            env,
            args.runs,
        )
        rows: list[tuple[str, float, Any]] = [(name, t, size) for name, (t, size) in got.items()]
        rows.insert(1, ("GET /permissions in-process", *timed_inproc(station, args.runs)))
        rows.insert(2, ("GET /permissions?limit=100 in-process", *timed_inproc(station, args.runs, "?limit=100")))
        base = got["curl-equivalent (urllib process)"][0]
        ls = got["permission-bot permissions ls"][0]
        lj = got["permission-bot permissions ls --json"][0]
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
