"""The database lost: two daemons on a PostgreSQL primary and its synchronous streaming replica (one two-host
URL), under steady load; the primary restarted N times, then killed and the replica promoted M times.

    .venv/bin/python bench/dbloss.py [--restarts 10] [--promotions 5] [--down 6] [--rate 2] [--between 6]

Real Synapse and real PostgreSQL servers on loopback (tests/support). Steady load: an agent submits
``--rate`` requests a second through whichever daemon takes it (a 503 is retried with the same body);
alice answers each prompt (a reply "1") as soon as she sees it. A restart: the primary stopped (fast),
``--down`` seconds, started again. A promotion: the primary killed (``pg_ctl stop -m immediate``), two
seconds, the replica promoted (``pg_ctl promote``); then a new replica is made of the new primary. Time
measured: from the database's return (or the promotion) to the first prompt posted after it (its server
timestamp). At the end: requests lost (not settled), prompts or settled edits doubled, daemons that exited.
Prints median and max, then one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.demo.homeserver import Homeserver  # noqa: E402
from tests.support.dbloss import Seen, answer, counts, load, settled_all  # noqa: E402
from tests.support.ha import HaStation, peer_of, until_role  # noqa: E402
from tests.support.pg_replica import Pair, replicated, restart, stop_immediately  # noqa: E402
from tests.support.station import Station  # noqa: E402

SID = "dbloss"


async def first_prompt_after(st: Station, since: float, timeout: float = 120) -> float:
    """Seconds from ``since`` (wall time) to the first prompt the room shows with a later server timestamp."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ts = [e["origin_server_ts"] for e in st.alice.events
              if st.is_prompt(e) and e["origin_server_ts"] > since * 1000]
        if ts:
            return (min(ts) / 1000) - since
        await asyncio.sleep(0.05)
    raise AssertionError("no prompt posted after the database came back")


def exited(pair: list[Station]) -> list[int]:
    return [s.daemon.returncode for s in pair if s.daemon is not None and s.daemon.poll() is not None]


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--restarts", type=int, default=10)
    ap.add_argument("--promotions", type=int, default=5)
    ap.add_argument("--down", type=float, default=6.0, help="seconds a restart keeps the database away")
    ap.add_argument("--rate", type=float, default=2.0, help="requests a second")
    ap.add_argument("--between", type=float, default=6.0, help="seconds of plain load between losses")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pb-dbloss-"))
    hs = Homeserver(work / "synapse")
    hs.start()
    pg = Pair()
    st = HaStation(hs, work / "a")
    st.env["PERMISSION_BOT_DATABASE_URL"] = await pg.create_database()
    pair: list[Station] = [st]
    back: dict[str, list[float]] = {"restart": [], "promotion": []}
    try:
        await st.setup()
        peer = peer_of(st, work / "b")
        peer.start_daemon()
        await until_role(peer, "standby")
        pair.append(peer)
        stop, answered, seen = asyncio.Event(), asyncio.Event(), Seen()
        loader = asyncio.create_task(load(pair, SID, a.rate, stop, seen))
        answerer = asyncio.create_task(answer(st, SID, answered))
        for i in range(a.restarts + a.promotions):
            await asyncio.sleep(a.between)
            kind = "restart" if i < a.restarts else "promotion"
            if kind == "restart":
                await asyncio.to_thread(restart, pg.primary, a.down)
            else:
                while not replicated(pg):
                    await asyncio.sleep(0.1)
                stop_immediately(pg.primary)
                await asyncio.sleep(2)
                await asyncio.to_thread(pg.replica.promote)
            since = time.time()
            took = await first_prompt_after(st, since)
            back[kind].append(took)
            print(f"{kind} {len(back[kind])}: first prompt {took:.2f} s after the database was back", flush=True)
            if kind == "promotion":
                await asyncio.to_thread(pg.follow_promoted)
            assert not exited(pair), f"a daemon exited: {exited(pair)}"
        stop.set()
        await loader
        records = await settled_all(pair, seen.ids)
        answered.set()
        await answerer
        await asyncio.sleep(5)  # the last edits
        prompts, edits = counts(st, SID)
        lost = sum(r["state"] == "pending" for r in records) + len(set(seen.ids) - set(prompts))
        asked_twice = len(set(prompts) - set(seen.ids))  # a request the agent never got back: one call asked twice
        doubled = sum(n > 1 for n in prompts.values()) + sum(n > 1 for n in edits.values()) + asked_twice
        out: dict[str, object] = {"restarts": a.restarts, "promotions": a.promotions, "down_s": a.down,
                                  "rate": a.rate, "requests": len(seen.ids), "refused_503": len(seen.refused),
                                  "lost": lost, "doubled": doubled, "exited": exited(pair)}
        for kind, xs in back.items():
            if xs:
                med, top = statistics.median(xs), max(xs)
                print(f"{kind}: back -> first prompt median {med:.2f} s, max {top:.2f} s ({len(xs)} rounds)")
                out[f"{kind}_median_s"], out[f"{kind}_max_s"] = round(med, 2), round(top, 2)
        print(f"requests {len(seen.ids)} (503s on the way: {len(seen.refused)}), lost {lost}, doubled {doubled}")
        print(json.dumps(out))
        return 0 if lost == 0 and doubled == 0 and not exited(pair) else 1
    finally:
        await st.teardown()
        for s in pair[1:]:
            s.stop_daemon()
        hs.stop()
        pg.stop()
        if not os.environ.get("PB_KEEP_TESTDIR"):  # the daemons' logs, to read after a failed run
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept: {work}")


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
