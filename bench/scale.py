"""Scale: 10,000 requests across 1,000 sessions, submitted concurrently, all answered from the room.

    .venv/bin/python bench/scale.py [--requests 10000] [--sessions 1000] [--rooms 10]

Real Synapse on loopback. Baseline, in the same run: a plain matrix-nio client
sending prompt-sized messages to the same server with the same concurrency the
daemon uses (half before the product's posting, half after; as many as there are
requests unless --baseline says fewer). Prints lost and doubled (both must be 0),
posting throughput and its ratio to the baseline (target >= 0.9), the daemon's
peak RSS (< 150 MB), `permissions ls` timed with every request pending (bench/ls.py's
timer; target < 1 s), and per phase the CPU seconds Synapse, the daemon and this
process used, so a slow phase says whose work it was.

Answering: a few people (--answerers, default 4 replies in flight) reply `1` to
every prompt as fast as the homeserver takes their messages, each reply costing
the homeserver two events (the reply and the bot's settled edit). ``--rooms N``: one bot serving N
station rooms (bench/rooms.py), request i submitted with room i mod N's agent token and answered in that
room; lost and doubled are counted over every room (compare the peak RSS with a run without --rooms). With 16 in
flight (earlier runs) the room's DAG forks into thousands of forward
extremities on Synapse, and every event persisted checks all of them: the run
then measures that, not the bot.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
from nio import AsyncClient, MessageDirection, RoomMessagesResponse

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.ls import timed
from bot.demo.homeserver import Homeserver
from bot.prompts import build_prompt
from bot.room.poster import SEND_CONCURRENCY  # the baseline sends with the daemon's concurrency
from tests.support.human import content, rel
from tests.support.station import TOKEN, Station, request_body


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Phases:
    """CPU seconds of Synapse, the daemon and this process, and the load average, per phase."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.rows: list[str] = []
        self._mark = self._now()

    def _now(self) -> tuple[float, dict[str, float]]:
        return time.perf_counter(), {**{k: cpu_s(p) for k, p in self.pids.items()}, "bench": time.process_time()}

    def end(self, name: str) -> None:
        (t0, c0), (t1, c1) = self._mark, self._now()
        load = os.getloadavg()[0]
        used = "  ".join(f"{k} {c1[k] - c0[k]:6.1f}" for k in c1)
        self.rows.append(f"  {name:<22} {t1 - t0:7.1f}s wall  CPU-s: {used}  (load {load:.1f})")
        self._mark = (t1, c1)


class LogCount:
    """Counts a log event's lines, reading only what was appended since the last call."""

    def __init__(self, path: Path, needle: str) -> None:
        self.path, self.needle, self.pos, self.count = path, needle.encode(), 0, 0

    def __call__(self) -> int:
        with self.path.open("rb") as f:
            f.seek(self.pos)
            chunk = f.read()
        whole = chunk[: chunk.rfind(b"\n") + 1]
        self.pos += len(whole)
        self.count += whole.count(self.needle)
        return self.count


def time_ls(st: Station) -> str:
    """`permissions ls` (and --json) against the daemon as it is now, medians of 3 (bench/ls.py's timer)."""
    env = dict(os.environ, PERMISSION_BOT_URL=st.api_url, PERMISSION_BOT_TOKEN=TOKEN)
    got = timed({"python -c pass": [sys.executable, "-c", "pass"],
                 "permissions ls": [st.exe, "permissions", "ls"],
                 "permissions ls --json": [st.exe, "permissions", "ls", "--json"]}, env, 3)
    return "  ".join(f"{name} {t * 1000:.0f} ms ({size // 1000} kB)" for name, (t, size) in got.items())


async def keep_analyzed(hs: Homeserver, every: float = 30.0) -> None:
    """Synapse on SQLite never gathers planner statistics; without them every event a client is sent
    costs a scan of the room (see Homeserver.analyze), and the run slows as the room grows."""
    while True:
        await asyncio.to_thread(hs.analyze)
        await asyncio.sleep(every)


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def baseline(hs: Homeserver, room_id: str, token: str, user_id: str, n: int, tag: str = "") -> float:
    """Seconds for a plain nio client to send ``n`` prompt-sized messages."""
    c = AsyncClient(hs.url, user_id)
    c.access_token, c.user_id = token, user_id
    from datetime import UTC, datetime

    sample = build_prompt(
        request_id="base:1", session_id="base", request_seq=1, title="Run the test suite", tool_kind="execute",
        options=request_body("x")["options"], raw_input={"command": "bun test"}, locations=[{"path": "apps/hub"}],
        content=[], digest="0" * 64, revision=1, expires_at=datetime(2030, 1, 1, tzinfo=UTC),
    )
    sem = asyncio.Semaphore(SEND_CONCURRENCY)

    async def one(i: int) -> None:
        async with sem:
            r = await c.room_send(room_id, "m.room.message", sample, tx_id=f"baseline{tag}-{i}")
            assert hasattr(r, "event_id"), r

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    dt = time.perf_counter() - t0
    await c.close()
    return dt


async def report_progress(http: aiohttp.ClientSession, api_url: str, t0: float) -> None:
    """Every 30 s while answering: how many are still pending, and the rate since the last line."""
    last_t, last_n = t0, None
    while True:
        await asyncio.sleep(30)
        async with http.get(api_url + "/metrics") as r:
            text = await r.text()
        pending = next((float(line.split()[1]) for line in text.splitlines()
                        if line.startswith("permission_bot_pending ")), float("nan"))
        now = time.perf_counter()
        if last_n is not None:
            print(f"  {now - t0:6.0f}s  pending {pending:.0f}  {(last_n - pending) / (now - last_t):.1f} settled/s",
                  flush=True)
        last_t, last_n = now, pending


async def room_events(client: AsyncClient, room_id: str) -> list[dict[str, Any]]:
    """Every event of the room, oldest first (paginating back from now)."""
    r = await client.sync(timeout=0)
    token = r.next_batch  # type: ignore[union-attr]
    out: list[dict[str, Any]] = []
    while True:
        m = await client.room_messages(room_id, start=token, direction=MessageDirection.back, limit=1000)
        assert isinstance(m, RoomMessagesResponse), m
        out.extend(ev.source for ev in m.chunk)
        if not m.chunk or not m.end:
            break
        token = m.end
    out.reverse()
    return out


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--baseline", type=int, default=0, help="plain nio sends in all (default: --requests)")
    ap.add_argument("--answerers", type=int, default=4, help="replies in flight at once (default 4)")
    ap.add_argument("--rooms", type=int, default=1, help="station rooms the requests are spread over (default 1)")
    a = ap.parse_args()
    n, sessions = a.requests, a.sessions
    nb = a.baseline or n
    work = Path(tempfile.mkdtemp(prefix="pb-scale-"))
    hs = Homeserver(work / "synapse")
    hs.start()
    from bench.rooms import ManyRooms, room_token

    st = ManyRooms(hs, work / "station", a.rooms)
    st.prompts["timeout"] = "6h"  # no request may expire while the bench runs
    try:
        await st.setup()
        assert hs.proc is not None and st.daemon is not None
        stats = asyncio.create_task(keep_analyzed(hs))
        phases = Phases({"synapse": hs.proc.pid, "daemon": st.daemon.pid})
        # the baseline's sends half before and half after the product's, so both see the same load
        base_s = await baseline(hs, st.room_id, st.carol.token, st.carol.user_id, nb // 2, "a")
        phases.end(f"baseline, {nb // 2} sends")

        sem = asyncio.Semaphore(64)
        ids: list[str] = []
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"}) as http:

            async def submit(i: int) -> None:
                body = request_body(f"scale{i % sessions}", key=f"k{i}", tool_call_id=f"call{i}",
                                    command=f"echo {i}")
                auth = {"Authorization": f"Bearer {room_token(i % a.rooms)[1]}"} if a.rooms > 1 else None
                async with sem, http.post(st.api_url + "/permissions", json=body, headers=auth) as r:
                    assert r.status == 201, await r.text()
                    ids.append((await r.json())["id"])

            t0 = time.perf_counter()
            await asyncio.gather(*(submit(i) for i in range(n)))
            submit_s = time.perf_counter() - t0
            # Posting: until the daemon has posted every prompt (its own counter, polled).
            while True:
                async with http.get(st.api_url + "/metrics") as r:
                    text = await r.text()
                done = next(float(line.split()[1]) for line in text.splitlines()
                            if line.startswith("permission_bot_prompts_posted_total "))
                if done >= n:
                    break
                await asyncio.sleep(0.02)
            post_s = time.perf_counter() - t0
            print(f"product: {n} requests submitted in {submit_s:.2f}s, all posted after {post_s:.2f}s "
                  f"= {n / post_s:.1f} prompts/s", flush=True)
            phases.end(f"submit+post {n}")
            print(f"ls with {n} pending: {time_ls(st)}", flush=True)
            phases.end("ls timing")

            # Answer every prompt from the room by a reply, concurrently.
            asem = asyncio.Semaphore(a.answerers)

            room_index = {"default": 0, **{f"room{k}": k for k in range(1, a.rooms)}}

            async def answer(pid: str, room: str) -> None:
                c = {"msgtype": "m.text", "body": "1", "m.relates_to": {"m.in_reply_to": {"event_id": pid}}}
                async with asem:
                    r = await st.alice.client.room_send(st.room_ids[room_index[room]], "m.room.message", c)
                    assert hasattr(r, "event_id"), r

            prompts: dict[str, tuple[str, str]] = {}

            async def prompt_of(rid: str) -> None:
                async with sem, http.get(f"{st.api_url}/permissions/{rid}") as r:
                    got = await r.json()
                    prompts[rid] = (got["prompt_event_id"], got.get("room", "default"))

            await asyncio.gather(*(prompt_of(rid) for rid in ids))
            phases.end("prompt ids fetched")
            t1 = time.perf_counter()
            progress = asyncio.create_task(report_progress(http, st.api_url, t1))
            await asyncio.gather(*(answer(pid, room) for pid, room in prompts.values()))
            progress.cancel()

            async def outcome(rid: str) -> dict[str, Any]:
                async with sem, http.get(f"{st.api_url}/permissions/{rid}?wait=120") as r:
                    return dict(await r.json())

            recs = await asyncio.gather(*(outcome(rid) for rid in ids))
            answer_s = time.perf_counter() - t1
        settled = [r for r in recs if r["state"] == "resolved" and r["outcome"]["option_id"] == "allow_once"]
        print(f"answers: {n} replies ({a.answerers} in flight) applied in {answer_s:.2f}s = {n / answer_s:.1f}/s; "
              f"resolved with the right option: {len(settled)}/{n}", flush=True)
        phases.end(f"answer {n}")
        # Each settled edit logs the request's request_timing once it is sent: wait for all of them.
        t2, timings = time.perf_counter(), LogCount(st.log_path, "event='request_timing'")
        while timings() < n:
            if time.perf_counter() - t2 > 600:
                break
            await asyncio.sleep(1.0)
        print(f"edits: all sent {time.perf_counter() - t2:.1f}s after the last answer was applied")
        await asyncio.sleep(5)  # the keycap clean-up behind them
        phases.end("edits, keycap clean-up")
        base_s += await baseline(hs, st.room_id, st.carol.token, st.carol.user_id, nb - nb // 2, "b")
        phases.end(f"baseline, {nb - nb // 2} sends")
        print(f"baseline: plain nio, {nb} sends x{SEND_CONCURRENCY}: {base_s:.2f}s = {nb / base_s:.1f} msg/s")
        events = [e for rid in st.room_ids for e in await room_events(st.alice.client, rid)]
        posted = Counter(content(e).get("request_id") for e in events if st.is_prompt(e))
        edits = Counter(rel(e).get("event_id") for e in events
                        if e.get("sender") == st.bot_id and rel(e).get("rel_type") == "m.replace")
        lost = sum(1 for rid in ids if posted.get(rid, 0) == 0) + (n - len(settled))
        doubled = sum(1 for c in posted.values() if c > 1) + sum(1 for c in edits.values() if c > 1)
        assert st.daemon is not None
        rss = peak_rss_mb(st.daemon.pid)
        ratio = (n / post_s) / (nb / base_s)
        kinds = Counter(f"{e.get('type')} from {'the bot' if e.get('sender') == st.bot_id else 'people'}"
                        for e in events)
        print("room events:", ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()) if v > 5))
        backfills = LogCount(st.log_path, "event='timeline_backfilled'")()
        print(f"the bot's sync: {backfills} limited timelines backfilled")
        print("per phase:", *phases.rows, sep="\n")
        print(f"lost: {lost}  doubled: {doubled}  (both must be 0)")
        print(f"posting throughput ratio product/baseline: {ratio:.2f} (target >= 0.9)")
        print(f"daemon peak RSS: {rss:.1f} MB (target < 150 MB)")
        print(json.dumps({"requests": n, "sessions": sessions, "rooms": a.rooms,
                          "baseline_msgs_per_s": round(nb / base_s, 1),
                          "prompts_per_s": round(n / post_s, 1), "ratio": round(ratio, 2), "lost": lost,
                          "doubled": doubled, "peak_rss_mb": round(rss, 1)}))
        return 0 if lost == 0 and doubled == 0 else 1
    finally:
        if "stats" in locals():
            stats.cancel()
        await st.teardown()
        hs.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
