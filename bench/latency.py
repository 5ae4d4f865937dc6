"""Latency: what the bot adds to the homeserver's own two hops.

    .venv/bin/python bench/latency.py [--rounds 30]

Real Synapse on loopback. Baseline: two plain matrix-nio clients play ping-pong
(A sends, B sees it by sync and replies, A sees the reply), N rounds. Product:
an SDK agent behind `permission-bot acp` asks permission; a scripted answerer
sees the prompt by sync and replies "1"; the agent gets the outcome, N rounds
(the agent's own clock, from asking to the answer). Prints medians, p95 and
the ratio product/baseline (target: median ratio <= 1.25).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, Client, spawn_agent_process, text_block
from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation
from nio import AsyncClient, SyncResponse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.demo.homeserver import Homeserver  # noqa: E402
from tests.support.station import TOKEN, V2, Station  # noqa: E402

FOUR = [["allow_once", "Allow once", "allow_once"], ["allow_always", "Always allow", "allow_always"],
        ["reject_once", "Reject", "reject_once"], ["reject_always", "Never allow", "reject_always"]]


class Peer:
    """A nio client whose sync loop wakes waiters the moment an event arrives."""

    def __init__(self, url: str, user_id: str, token: str, room_id: str) -> None:
        self.c = AsyncClient(url, user_id)
        self.c.access_token, self.c.user_id = token, user_id
        self.room_id = room_id
        self.new = asyncio.Condition()
        self.events: list[dict[str, Any]] = []
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        r = await self.c.sync(timeout=0, full_state=True)
        assert isinstance(r, SyncResponse)
        self.task = asyncio.create_task(self._loop(r.next_batch))

    async def _loop(self, since: str) -> None:
        while True:
            r = await self.c.sync(timeout=30000, since=since)
            if not isinstance(r, SyncResponse):
                await asyncio.sleep(0.1)
                continue
            since = r.next_batch
            room = r.rooms.join.get(self.room_id)
            if room and room.timeline.events:
                async with self.new:
                    self.events.extend(ev.source for ev in room.timeline.events)
                    self.new.notify_all()

    async def next_matching(self, pred: Any, start: int) -> tuple[dict[str, Any], int]:
        async with self.new:
            while True:
                for i in range(start, len(self.events)):
                    if pred(self.events[i]):
                        return self.events[i], i + 1
                await self.new.wait()

    async def send_text(self, body: str, reply_to: str | None = None) -> None:
        c: dict[str, Any] = {"msgtype": "m.text", "body": body}
        if reply_to:
            c["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
        r = await self.c.room_send(self.room_id, "m.room.message", c)
        assert hasattr(r, "event_id"), r

    async def close(self) -> None:
        if self.task:
            self.task.cancel()
        await self.c.close()


def _body(ev: dict[str, Any]) -> str:
    c = ev.get("content")
    return str(c.get("body", "")) if isinstance(c, dict) else ""


async def baseline(a: Peer, b: Peer, rounds: int) -> list[float]:
    """Ping-pong: A sends, B sees it and replies, A sees the reply (ms per round)."""
    out = []
    ia, ib = len(a.events), len(b.events)
    for i in range(rounds):
        t0 = time.perf_counter()
        await a.send_text(f"ping {i}")
        _ev, ib = await b.next_matching(lambda e, i=i: _body(e) == f"ping {i}", ib)
        await b.send_text(f"pong {i}")
        _ev, ia = await a.next_matching(lambda e, i=i: _body(e) == f"pong {i}", ia)
        out.append((time.perf_counter() - t0) * 1000)
    return out


class Recorder(Client):
    def __init__(self) -> None:
        self.outcomes: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def request_permission(self, options: Any, session_id: str, tool_call: Any, **kw: Any) -> Any:
        raise RuntimeError("the proxy forwarded a permission request to the client")

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        if getattr(update, "session_update", "") == "agent_message_chunk":
            t = getattr(update.content, "text", "")
            if t.startswith("OUTCOME "):
                await self.outcomes.put(json.loads(t[len("OUTCOME "):]))


async def product(st: Station, answerer: Peer, rounds: int) -> list[float]:
    """An SDK agent behind `permission-bot acp` asks; the answerer replies "1" when it sees the prompt."""
    client = Recorder()
    agent = [st.exe, "acp", "--url", st.api_url, "--token", TOKEN, "--", sys.executable,
             str(ROOT / "tests" / "agents" / "scripted_agent.py")]
    out: list[float] = []
    async with spawn_agent_process(client, agent[0], *agent[1:]) as (conn, _proc):
        await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=False, write_text_file=False), terminal=False),
            client_info=Implementation(name="bench", version="1"))
        sess = await conn.new_session(cwd=str(ROOT), mcp_servers=[])
        sid = sess.session_id
        start = len(answerer.events)

        async def answer_loop() -> None:
            nonlocal start
            while True:
                ev, start = await answerer.next_matching(
                    lambda e: e.get("sender") == st.bot_id and isinstance(e.get("content"), dict)
                    and e["content"].get("suite_event_type") == V2 and e["content"].get("session_id") == sid
                    and (e["content"].get("m.relates_to") or {}).get("rel_type") != "m.replace", start)
                await answerer.send_text("1", reply_to=ev["event_id"])

        answering = asyncio.create_task(answer_loop())
        try:
            for i in range(rounds):
                script = {"tool_call_id": f"call_{i}", "title": f"Run step {i}", "kind": "execute",
                          "raw_input": {"command": f"make step{i}"}, "locations": ["."], "options": FOUR}
                await conn.prompt(session_id=sid, prompt=[text_block(json.dumps(script))])
                o = await asyncio.wait_for(client.outcomes.get(), 60)
                assert o.get("optionId") == "allow_once", o
                out.append(float(o["elapsed_ms"]))
        finally:
            answering.cancel()
    return out


def p95(xs: list[float]) -> float:
    return sorted(xs)[max(0, round(0.95 * len(xs)) - 1)]


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--no-seed-reactions", action="store_true", help="measure without keycap seeding")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pb-latency-"))
    hs = Homeserver(work / "synapse")
    hs.start()
    st = Station(hs, work / "station")
    if a.no_seed_reactions:
        st.prompts["seed_reactions"] = False
    peers: list[Peer] = []
    try:
        await st.setup()
        ping = Peer(hs.url, st.carol.user_id, st.carol.token, st.room_id)
        pong = Peer(hs.url, st.bob.user_id, st.bob.token, st.room_id)
        answerer = Peer(hs.url, st.alice.user_id, st.alice.token, st.room_id)
        peers = [ping, pong, answerer]
        for p in peers:
            await p.start()
        await baseline(ping, pong, 3)  # warm up
        base = await baseline(ping, pong, a.rounds)
        prod = await product(st, answerer, a.rounds)
        bm, pm = statistics.median(base), statistics.median(prod)
        print(f"baseline ping-pong (2 hops, plain nio): median {bm:.1f} ms, p95 {p95(base):.1f} ms, n={len(base)}")
        print(f"product ask -> answer (agent's clock):   median {pm:.1f} ms, p95 {p95(prod):.1f} ms, n={len(prod)}")
        print(f"median ratio product/baseline: {pm / bm:.2f} (target <= 1.25)")
        print(json.dumps({"baseline_median_ms": round(bm, 1), "baseline_p95_ms": round(p95(base), 1),
                          "product_median_ms": round(pm, 1), "product_p95_ms": round(p95(prod), 1),
                          "ratio": round(pm / bm, 2), "rounds": a.rounds}))
        return 0
    finally:
        for p in peers:
            await p.close()
        await st.teardown()
        hs.stop()


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
