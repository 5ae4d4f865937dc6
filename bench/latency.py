"""Latency: what the bot adds to the homeserver's own two hops.

    .venv/bin/python bench/latency.py [--rounds 90] [--blocks 3] [--plain] [--like-element] [--all-syncing]
    .venv/bin/python bench/latency.py --rooms 5 [--rounds 90] [--blocks 3]
                                      [--postgres]

``--rooms N``: one bot serving N station rooms; requests over the HTTP API, spread round-robin over the N
rooms, against the same requests all in one room, in alternating blocks of the same run; prints both and
their ratios (median, p90). See bench/rooms.py.

``--postgres``: the daemon's state in a PostgreSQL cluster started for the run (tests/support/postgres.py)
instead of SQLite under its state folder.

Real Synapse on loopback. Baseline: two plain matrix-nio clients play ping-pong
(A sends, B sees it by sync and replies, A sees the reply). Product, the
sequential pattern: an SDK agent behind `permission-bot acp` asks permission; a
scripted answerer sees the prompt by sync and replies "1" (``--plain``: sends a
plain "1", which the timeline binds); the agent gets the outcome and asks again
at once. N rounds of each, in blocks: baseline, product, baseline, ..., baseline
(the machine's load drifts, so both see the same; the clients all run in this
process, so the pair not being measured stops syncing meanwhile, ``--all-syncing``
keeps it: else the ping-pong pair parses every prompt on the answerer's loop);
each baseline block starts
once the room shows every prompt edited (the edits are sent off the path, and
must not slow the baseline's rounds). Product rounds are timed on the agent's
own clock, from asking to the answer. Prints median and p90 of both and their
ratios (targets: median <= 1.10, p90 <= 1.25), the rounds in order and whether
they fall into two groups (bimodal), and the per-stage breakdown from the
``request_timing`` events of the daemon's and the proxy's logs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import re
import shutil
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


WHOLE = {"room": {"timeline": {"limit": 1000}}}  # a burst of edits is never cut short (a limited timeline)


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
        self.since = r.next_batch
        self.task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            r = await self.c.sync(timeout=30000, since=self.since, sync_filter=WHOLE)
            if not isinstance(r, SyncResponse):
                await asyncio.sleep(0.1)
                continue
            await self._take(r)

    async def _take(self, r: SyncResponse) -> None:
        room = r.rooms.join.get(self.room_id)
        async with self.new:  # the token and the events together: a pause never loses a batch
            self.since = r.next_batch
            if room and room.timeline.events:
                self.events.extend(ev.source for ev in room.timeline.events)
                self.new.notify_all()

    async def pause(self) -> None:
        """Stop syncing (this client sits out a phase: it would parse every event on the bench's one loop)."""
        if self.task:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
            self.task = None

    async def resume(self) -> None:
        """Catch up on what came while paused, then sync again."""
        if self.task is None:
            r = await self.c.sync(timeout=0, since=self.since, sync_filter=WHOLE)
            assert isinstance(r, SyncResponse), r
            await self._take(r)
            self.task = asyncio.create_task(self._loop())

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


BASE_STAGES: dict[str, list[float]] = {"send": [], "seen": []}  # the baseline's hops, split (ms)


async def baseline(a: Peer, b: Peer, rounds: int) -> list[float]:
    """Ping-pong: A sends, B sees it and replies, A sees the reply (ms per round). Each hop's send (the
    request, until the homeserver answers) and the rest (until the other side's sync has it) go to
    BASE_STAGES, to set beside the product's own."""
    out = []
    ia, ib = len(a.events), len(b.events)
    for i in range(rounds):
        t0 = time.perf_counter()
        await a.send_text(f"ping {i}")
        t1 = time.perf_counter()
        _ev, ib = await b.next_matching(lambda e, i=i: _body(e) == f"ping {i}", ib)
        t2 = time.perf_counter()
        await b.send_text(f"pong {i}")
        t3 = time.perf_counter()
        _ev, ia = await a.next_matching(lambda e, i=i: _body(e) == f"pong {i}", ia)
        t4 = time.perf_counter()
        BASE_STAGES["send"] += [(t1 - t0) * 1000, (t3 - t2) * 1000]
        BASE_STAGES["seen"] += [(t2 - t1) * 1000, (t4 - t3) * 1000]
        out.append((t4 - t0) * 1000)
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


async def product(
    st: Station, answerer: Peer, blocks: list[int], log: Any, between: Any, plain: bool = False,
    like_element: bool = False,
) -> list[float]:
    """An SDK agent behind `permission-bot acp` asks; the answerer replies "1" when it sees the prompt (or,
    with ``plain``, sends a plain "1"). ``blocks``: rounds asked one right after the other; after each block,
    once the room shows every prompt edited (the edits are sent off the path, but must not land in the
    baseline's rounds), ``between(i)`` runs (a baseline block)."""
    client = Recorder()
    agent = [st.exe, "acp", "--url", st.api_url, "--token", TOKEN, "--", sys.executable,
             str(ROOT / "tests" / "agents" / "scripted_agent.py")]
    out: list[float] = []
    async with spawn_agent_process(client, agent[0], *agent[1:], transport_kwargs={"stderr": log}) as (conn, _proc):
        await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=False, write_text_file=False), terminal=False),
            client_info=Implementation(name="bench", version="1"))
        sess = await conn.new_session(cwd=str(ROOT), mcp_servers=[])
        sid = sess.session_id
        start = len(answerer.events)
        prompts: list[str] = []

        async def answer_loop() -> None:
            nonlocal start
            while True:
                ev, start = await answerer.next_matching(
                    lambda e: e.get("sender") == st.bot_id and isinstance(e.get("content"), dict)
                    and e["content"].get("suite_event_type") == V2 and e["content"].get("session_id") == sid
                    and (e["content"].get("m.relates_to") or {}).get("rel_type") != "m.replace", start)
                prompts.append(ev["event_id"])
                if like_element:  # Element marks the prompt read and says it is typing before the answer
                    await answerer.c.room_read_markers(answerer.room_id, ev["event_id"], ev["event_id"])
                    await answerer.c.room_typing(answerer.room_id, True, 5000)
                await answerer.send_text("1", reply_to=None if plain else ev["event_id"])

        answering = asyncio.create_task(answer_loop())
        n = 0
        try:
            for b, size in enumerate(blocks):
                for _ in range(size):
                    script = {"tool_call_id": f"call_{n}", "title": f"Run step {n}", "kind": "execute",
                              "raw_input": {"command": f"make step{n}"}, "locations": ["."], "options": FOUR}
                    n += 1
                    await conn.prompt(session_id=sid, prompt=[text_block(json.dumps(script))])
                    o = await asyncio.wait_for(client.outcomes.get(), 60)
                    assert o.get("optionId") == "allow_once", o
                    out.append(float(o["elapsed_ms"]))
                await _all_edited(st, answerer, prompts)
                await between(b)
        finally:
            answering.cancel()
    return out


async def _all_edited(st: Station, answerer: Peer, prompts: list[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        edited = {(e.get("content") or {}).get("m.relates_to", {}).get("event_id") for e in answerer.events
                  if e.get("sender") == st.bot_id
                  and (e.get("content") or {}).get("m.relates_to", {}).get("rel_type") == "m.replace"}
        if set(prompts) <= edited:
            return
        await asyncio.sleep(0.05)
    print("warning: prompts still not edited after 60 s", file=sys.stderr)


def split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def pct(xs: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank)."""
    return sorted(xs)[max(0, min(len(xs), round(q * len(xs))) - 1)]


KV = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\S+)")


def timings(path: Path) -> list[dict[str, float]]:
    """The ``request_timing`` events of a daemon or proxy log (key=value or JSON lines)."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if "request_timing" not in line:
            continue
        try:
            fields: dict[str, Any] = json.loads(line)
        except ValueError:
            fields = {k: v.strip("'\"") for k, v in KV.findall(line)}
        if fields.get("event") != "request_timing":
            continue
        row = {}
        for k, v in fields.items():
            if k.endswith("_ms"):
                try:
                    row[k] = float(v)
                except (TypeError, ValueError):
                    pass
        out.append(row)
    return out


STAGES = [  # (label, field): one request's way, in order
    ("agent's request read (proxy) -> submitted (daemon)", "asked_to_submit_ms"),
    ("submitted -> prompt posted", "submit_to_post_ms"),
    ("  of which: submitted -> prompt sent (the bot)", "submit_to_send_ms"),
    ("  and: prompt sent -> posted (the homeserver)", "send_to_post_ms"),
    ("posted -> answer sent (person's sync + reply)", "post_to_answer_ms"),
    ("answer sent -> seen in the bot's sync", "answer_to_seen_ms"),
    ("seen -> settled", "seen_to_settled_ms"),
    ("settled -> proxy told (long-poll answer)", "settled_to_proxy_ms"),
    ("proxy told -> agent told", "proxy_to_agent_ms"),
    ("settled -> settled edit sent (off the path)", "settled_to_edit_ms"),
]


def breakdown(rows: list[dict[str, float]]) -> dict[str, tuple[float, float, int]]:
    out = {}
    for label, field in STAGES:
        xs = [r[field] for r in rows if field in r]
        if xs:
            out[label] = (statistics.median(xs), pct(xs, 0.9), len(xs))
    return out


def bimodal(prod: list[float], base_median: float) -> tuple[bool, float, float]:
    """Do the rounds fall into two groups? Either they alternate (lag-1 autocorrelation <= -0.3), or sorted
    they show an empty band wider than half the baseline median with at least 20 % of the rounds on each side.
    Returns (bimodal, the widest such band in ms, the lag-1 autocorrelation)."""
    m = statistics.mean(prod)
    num = sum((a - m) * (b - m) for a, b in itertools.pairwise(prod))
    den = sum((a - m) ** 2 for a in prod) or 1.0
    lag1 = num / den
    xs = sorted(prod)
    lo, hi = max(1, int(0.2 * len(xs))), int(0.8 * len(xs))
    band = max((xs[i] - xs[i - 1] for i in range(lo, hi + 1) if i < len(xs)), default=0.0)
    return lag1 <= -0.3 or band > 0.5 * base_median, band, lag1


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=90)
    ap.add_argument("--blocks", type=int, default=3, help="product blocks, each between two baseline blocks "
                    "(the machine's load drifts: both see the same); keep blocks of 20+ rounds, longer than the "
                    "3 s an edit may wait, so the product pays for its edits")
    ap.add_argument("--no-seed-reactions", action="store_true", help="measure without keycap seeding")
    ap.add_argument("--plain", action="store_true", help='answer with a plain "1" (bound by the timeline), not a reply')
    ap.add_argument("--all-syncing", action="store_true",
                    help="keep every client syncing in both phases (the baseline's pair parses the prompts too)")
    ap.add_argument("--like-element", action="store_true",
                    help="the answerer sends a read receipt and a typing notice before each answer, as Element does")
    ap.add_argument("--rooms", type=int, default=1, help="N station rooms: requests spread over them, compared "
                    "with the same requests in one room (ratios of median and p90)")
    ap.add_argument("--postgres", action="store_true", help="the daemon's state in PostgreSQL, not SQLite")
    a = ap.parse_args()
    if a.rooms > 1:
        return await many_rooms(a.rooms, a.rounds, a.blocks)
    work = Path(tempfile.mkdtemp(prefix="pb-latency-"))
    hs = Homeserver(work / "synapse")
    hs.start()
    st = Station(hs, work / "station")
    pg = None
    if a.postgres:
        from tests.support.postgres import PgCluster

        pg = PgCluster()
        pg.init()
        pg.start()
        pg.setup_roles()
        st.env["PERMISSION_BOT_DATABASE_URL"] = await pg.create_database()
    if a.no_seed_reactions:
        st.prompts["seed_reactions"] = False
    peers: list[Peer] = []
    proxy_log = work / "proxy.log"
    try:
        await st.setup()
        ping = Peer(hs.url, st.carol.user_id, st.carol.token, st.room_id)
        pong = Peer(hs.url, st.bob.user_id, st.bob.token, st.room_id)
        answerer = Peer(hs.url, st.alice.user_id, st.alice.token, st.room_id)
        peers = [ping, pong, answerer]
        for p in peers:
            await p.start()
        await baseline(ping, pong, 3)  # warm up
        # Baseline blocks before, between and after the product's blocks: both see the same load. The
        # clients all run on this one loop, so those not in a phase sit it out (else each of them parses
        # every event of the other phase's rounds here, which separate devices would not).
        bsizes = split(a.rounds, a.blocks + 1)
        base: list[float] = []
        idle = [] if a.all_syncing else [answerer]

        async def between(i: int) -> None:
            for p in idle:
                await p.pause()
            for p in (ping, pong):
                await p.resume()
            base.extend(await baseline(ping, pong, bsizes[i + 1]))
            if not a.all_syncing:
                await ping.pause()
                await pong.pause()
                await answerer.resume()

        await between(-1)

        with proxy_log.open("wb") as f:
            prod = await product(st, answerer, split(a.rounds, a.blocks), f, between, plain=a.plain,
                                 like_element=a.like_element)
        bm, pm, b90, p90 = statistics.median(base), statistics.median(prod), pct(base, 0.9), pct(prod, 0.9)
        two, band, lag1 = bimodal(prod, bm)
        print(f"baseline ping-pong (2 hops, plain nio): median {bm:.1f} ms, p90 {b90:.1f} ms, n={len(base)}")
        print(f"product ask -> answer (agent's clock):   median {pm:.1f} ms, p90 {p90:.1f} ms, n={len(prod)}")
        print(f"ratio median {pm / bm:.2f} (target <= 1.10), p90 {p90 / b90:.2f} (target <= 1.25)")
        print(f"rounds in order (ms): {' '.join(f'{x:.0f}' for x in prod)}")
        print(f"bimodal: {'YES' if two else 'no'} (widest empty band between the 20th and 80th percentile "
              f"{band:.0f} ms, bimodal above {0.5 * bm:.0f}; lag-1 autocorrelation {lag1:+.2f}, "
              f"alternating at <= -0.30)")
        for what, label in (("send", "a send (request -> the homeserver's answer)"),
                            ("seen", "sent -> in the other side's sync")):
            xs = BASE_STAGES[what]
            print(f"baseline hop: {label:<42} median {statistics.median(xs):7.1f} ms  p90 {pct(xs, 0.9):7.1f} ms")
        rows = timings(st.log_path) + timings(proxy_log)
        print("stage breakdown (from request_timing in the daemon's and the proxy's logs):")
        for label, (med, q90, n) in breakdown(rows).items():
            print(f"  {label:<52} median {med:7.1f} ms  p90 {q90:7.1f} ms  n={n}")
        print(json.dumps({"baseline_median_ms": round(bm, 1), "baseline_p90_ms": round(b90, 1),
                          "product_median_ms": round(pm, 1), "product_p90_ms": round(p90, 1),
                          "ratio_median": round(pm / bm, 2), "ratio_p90": round(p90 / b90, 2),
                          "bimodal": two, "rounds": a.rounds, "blocks": a.blocks,
                          "answer": "plain" if a.plain else "reply", "like_element": a.like_element,
                          "all_syncing": a.all_syncing, "state": "postgresql" if a.postgres else "sqlite"}))
        return 0
    finally:
        await _clean_up(peers, st, hs, work)
        if pg is not None:
            pg.stop()


async def _clean_up(peers: list[Peer], st: Station, hs: Homeserver, work: Path) -> None:
    for p in peers:
        await p.close()
    await st.teardown()
    hs.stop()
    shutil.rmtree(work, ignore_errors=True)


async def many_rooms(n: int, rounds: int, blocks: int) -> int:
    """``--rooms N`` (bench/rooms.py): N rooms against one room, in the same run."""
    from bench.rooms import ManyRooms, compare, report

    work = Path(tempfile.mkdtemp(prefix="pb-latency-rooms-"))
    hs = Homeserver(work / "synapse")
    hs.start()
    st = ManyRooms(hs, work / "station", n)
    peers: list[Peer] = []
    try:
        await st.setup()
        peers = [Peer(hs.url, st.alice.user_id, st.alice.token, rid) for rid in st.room_ids]
        for p in peers:
            await p.start()
        one, many = await compare(st, peers, rounds, blocks)
        print(json.dumps({"rooms": n, **report(one, many, pct, n)}))
        return 0
    finally:
        await _clean_up(peers, st, hs, work)


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
