"""Fail-over: two daemons on one PostgreSQL database under steady load, the leader killed N times.

    .venv/bin/python bench/failover.py [--kills 5] [--rate 5] [--between 8]

Real Synapse and a real PostgreSQL cluster on loopback (tests/support). Steady load: an agent submits
``--rate`` requests a second through the API of a daemon that is alive; alice answers each prompt (a reply
"1") as soon as she sees it. Every ``--between`` seconds the leader gets kill -9 and is restarted at once
(it comes back as the standby). Take-over time: from the last event the old leader put in the room (its
server timestamp) to the first prompt the new one posted. At the end: requests lost (not settled), prompts
or settled edits doubled. Prints median and max take-over, then one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.demo.homeserver import Homeserver  # noqa: E402
from tests.support.ha import HaStation, peer_of, role_of, until_role  # noqa: E402
from tests.support.human import rel  # noqa: E402
from tests.support.postgres import PgCluster  # noqa: E402
from tests.support.station import AGENT_TOKEN, Station, request_body  # noqa: E402

SID = "failover"


async def leader_of(pair: list[Station]) -> Station:
    while True:
        for s in pair:
            if await role_of(s) == "leader":
                return s
        await asyncio.sleep(0.05)


async def load(pair: list[Station], rate: float, stop: asyncio.Event, ids: list[str]) -> None:
    """Submit ``rate`` requests a second through whichever daemon answers."""
    i = 0
    while not stop.is_set():
        for s in pair:
            try:
                code, rec = await s.ahttp("POST", "/permissions", request_body(SID, tool_call_id=f"c{i}"),
                                          token=AGENT_TOKEN[1], timeout=5)
            except OSError:
                continue
            if code == 201:
                ids.append(rec["id"])
                i += 1
                break
        await asyncio.sleep(1 / rate)


async def answer(st: Station, stop: asyncio.Event) -> None:
    """alice replies "1" to each prompt once."""
    done: set[str] = set()
    while not stop.is_set():
        for e in st.alice.find(lambda e: st.is_prompt(e) and e["content"].get("session_id") == SID):
            if e["event_id"] not in done:
                done.add(e["event_id"])
                await st.alice.text("1", reply_to=e["event_id"])
        await asyncio.sleep(0.05)


def bot_events(st: Station) -> list[dict[str, Any]]:
    return [e for e in st.alice.events if e.get("sender") == st.bot_id]


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--rate", type=float, default=5.0, help="requests a second")
    ap.add_argument("--between", type=float, default=8.0, help="seconds between kills")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pb-failover-"))
    hs = Homeserver(work / "synapse")
    hs.start()
    pg = PgCluster()
    pg.init()
    pg.start()
    pg.setup_roles()
    st = HaStation(hs, work / "a")
    st.env["PERMISSION_BOT_DATABASE_URL"] = await pg.create_database()
    pair: list[Station] = [st]
    takeovers: list[float] = []
    try:
        await st.setup()
        peer = peer_of(st, work / "b")
        peer.start_daemon()
        await until_role(peer, "standby")
        pair.append(peer)
        stop, answered = asyncio.Event(), asyncio.Event()
        ids: list[str] = []
        loader, answerer = asyncio.create_task(load(pair, a.rate, stop, ids)), asyncio.create_task(answer(st, answered))
        for _ in range(a.kills):
            await asyncio.sleep(a.between)
            old = await leader_of(pair)
            new = pair[1] if old is pair[0] else pair[0]
            seen = len(st.alice.events)
            old.kill_daemon()
            last = max((e["origin_server_ts"] for e in bot_events(st)), default=0)
            await until_role(new, "leader")
            old.start_daemon()
            first = None
            while first is None:
                fresh = [e for e in st.alice.events[seen:] if st.is_prompt(e) and e["origin_server_ts"] > last]
                first = fresh[0]["origin_server_ts"] if fresh else None
                await asyncio.sleep(0.05)
            takeovers.append((first - last) / 1000)
            print(f"take-over {len(takeovers)}: {takeovers[-1]:.2f} s")
            await until_role(old, "standby")
        stop.set()
        await loader
        settled = 0
        reader = await leader_of(pair)
        for rid in ids:  # alice goes on answering the last ones
            _, rec = await reader.ahttp("GET", f"/permissions/{rid}?wait=60")
            settled += rec["state"] != "pending"
        answered.set()
        await answerer
        await asyncio.sleep(5)  # the last edits
        prompts = Counter(e["content"]["request_id"] for e in bot_events(st) if st.is_prompt(e)
                          and e["content"].get("session_id") == SID)
        edits = Counter(rel(e).get("event_id") for e in bot_events(st) if rel(e).get("rel_type") == "m.replace")
        lost, doubled = len(ids) - settled, sum(n > 1 for n in prompts.values()) + sum(n > 1 for n in edits.values())
        med, top = statistics.median(takeovers), max(takeovers)
        print(f"take-over (last leader event -> first prompt of the new one): median {med:.2f} s, max {top:.2f} s")
        print(f"requests {len(ids)}, lost {lost}, doubled prompts or edits {doubled}")
        print(json.dumps({"kills": a.kills, "rate": a.rate, "takeover_median_s": round(med, 2),
                          "takeover_max_s": round(top, 2), "requests": len(ids), "lost": lost, "doubled": doubled}))
        return 0 if lost == 0 and doubled == 0 else 1
    finally:
        await st.teardown()
        for s in pair[1:]:
            s.stop_daemon()
        hs.stop()
        pg.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
