"""SQLite against PostgreSQL in the same run: what the database engine adds to a request's round.

    .venv/bin/python bench/engines.py [--rounds 60] [--blocks 3]

Real Synapse and a real PostgreSQL cluster on loopback (tests/support). Two daemons on one homeserver, each
with its own bot account and station room: one keeps its state in SQLite under its folder, the other in a
PostgreSQL database (a leader of one: it takes the lock, checks its term before each send and inside
each Matrix-side write, NOTIFYs each change). A round, timed on the bench's clock over the HTTP API:
submitted -> the prompt seen by the room's answerer (a plain matrix-nio client) -> her reply "1" -> the
long-poll answered. Blocks of SQLite rounds alternate with blocks of PostgreSQL rounds (both see the same
load drift). Prints median and p90 of each and the ratios PostgreSQL / SQLite (target: median <= 1.10),
then one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.latency import Peer, pct
from bench.rooms import timed_round
from bot.demo.homeserver import Homeserver
from tests.support.postgres import PgCluster
from tests.support.station import OwnStation, Station


class PgStation(OwnStation):
    """The second daemon: accounts and room of its own (``...pg``), its state in PostgreSQL."""

    suffix = "pg"


async def compare(pairs: list[tuple[Station, Peer]], rounds: int, blocks: int) -> list[list[float]]:
    """Each station's rounds, in alternating blocks (the order of the pair flips each block)."""
    out: list[list[float]] = [[] for _ in pairs]
    per = max(1, rounds // blocks)
    for b in range(blocks):
        order = list(enumerate(pairs)) if b % 2 == 0 else list(reversed(list(enumerate(pairs))))
        for i, (st, peer) in order:
            for r in range(per):
                out[i].append(await timed_round(st, peer, f"e{i}b{b}r{r}"))
            await asyncio.sleep(3.5)  # the held edits go out between blocks, after each engine alike
    return out


def report(sqlite: list[float], pg: list[float]) -> dict[str, Any]:
    sm, pm, s90, p90 = statistics.median(sqlite), statistics.median(pg), pct(sqlite, 0.9), pct(pg, 0.9)
    print(f"SQLite     ask -> answer: median {sm:.1f} ms, p90 {s90:.1f} ms, n={len(sqlite)}")
    print(f"PostgreSQL ask -> answer: median {pm:.1f} ms, p90 {p90:.1f} ms, n={len(pg)}")
    print(f"ratio PostgreSQL / SQLite: median {pm / sm:.2f} (target <= 1.10), p90 {p90 / s90:.2f}")
    return {"sqlite_median_ms": round(sm, 1), "sqlite_p90_ms": round(s90, 1), "postgresql_median_ms": round(pm, 1),
            "postgresql_p90_ms": round(p90, 1), "ratio_median": round(pm / sm, 2), "ratio_p90": round(p90 / s90, 2)}


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=60, help="rounds per engine")
    ap.add_argument("--blocks", type=int, default=3, help="blocks per engine, alternating")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pb-engines-"))
    hs = Homeserver(work / "synapse")
    pg = PgCluster()
    stations: list[Station] = []
    peers: list[Peer] = []
    hs.start()
    try:
        pg.init()
        pg.start()
        pg.setup_roles()
        lite, onpg = Station(hs, work / "sqlite"), PgStation(hs, work / "postgres")
        onpg.env["PERMISSION_BOT_DATABASE_URL"] = await pg.create_database()
        for st in (lite, onpg):
            await st.setup()
            stations.append(st)
        peers = [Peer(hs.url, st.alice.user_id, st.alice.token, st.room_id) for st in stations]
        for p in peers:
            await p.start()
        for st, p in zip(stations, peers, strict=True):  # warm up: both daemons and both rooms
            for r in range(3):
                await timed_round(st, p, f"warm{r}")
        sqlite, on_pg = await compare(list(zip(stations, peers, strict=True)), a.rounds, a.blocks)
        print(json.dumps({"rounds": a.rounds, "blocks": a.blocks, **report(sqlite, on_pg)}))
        return 0
    finally:
        for p in peers:
            await p.close()
        for st in stations:
            await st.teardown()
        hs.stop()
        pg.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
