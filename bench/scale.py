"""Scale: 10,000 requests across 1,000 sessions, submitted concurrently, all answered from the room.

    .venv/bin/python bench/scale.py [--requests 10000] [--sessions 1000]

Real Synapse on loopback. Baseline, in the same run: a plain matrix-nio client
sending the same number of prompt-sized messages to the same server with the
same concurrency the daemon uses (half before the product's posting, half
after). Prints lost and doubled (both must be 0), posting throughput and its
ratio to the baseline (target >= 0.9), and the daemon's peak RSS (< 150 MB).
"""

from __future__ import annotations

import argparse
import asyncio
import json
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

from bot.demo.homeserver import Homeserver
from bot.prompts import build_prompt
from tests.support.human import content, rel
from tests.support.station import TOKEN, Station, request_body

SEND_CONCURRENCY = 16  # what the daemon's outbox uses


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
    a = ap.parse_args()
    n, sessions = a.requests, a.sessions
    work = Path(tempfile.mkdtemp(prefix="pb-scale-"))
    hs = Homeserver(work / "synapse")
    hs.start()
    st = Station(hs, work / "station")
    st.prompts["timeout"] = "6h"  # no request may expire while the bench runs
    try:
        await st.setup()
        # the baseline's sends half before and half after the product's, so both see the same load
        base_s = await baseline(hs, st.room_id, st.carol.token, st.carol.user_id, n // 2, "a")

        sem = asyncio.Semaphore(64)
        ids: list[str] = []
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"}) as http:

            async def submit(i: int) -> None:
                body = request_body(f"scale{i % sessions}", key=f"k{i}", tool_call_id=f"call{i}",
                                    command=f"echo {i}")
                async with sem, http.post(st.api_url + "/permissions", json=body) as r:
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
                  f"= {n / post_s:.1f} prompts/s")

            # Answer every prompt from the room by a reply, concurrently.
            asem = asyncio.Semaphore(SEND_CONCURRENCY)

            async def answer(pid: str) -> None:
                async with asem:
                    await st.alice.text("1", reply_to=pid)

            prompts: dict[str, str] = {}

            async def prompt_of(rid: str) -> None:
                async with sem, http.get(f"{st.api_url}/permissions/{rid}") as r:
                    prompts[rid] = (await r.json())["prompt_event_id"]

            await asyncio.gather(*(prompt_of(rid) for rid in ids))
            t1 = time.perf_counter()
            progress = asyncio.create_task(report_progress(http, st.api_url, t1))
            await asyncio.gather(*(answer(pid) for pid in prompts.values()))
            progress.cancel()

            async def outcome(rid: str) -> dict[str, Any]:
                async with sem, http.get(f"{st.api_url}/permissions/{rid}?wait=120") as r:
                    return dict(await r.json())

            recs = await asyncio.gather(*(outcome(rid) for rid in ids))
            answer_s = time.perf_counter() - t1
        settled = [r for r in recs if r["state"] == "resolved" and r["outcome"]["option_id"] == "allow_once"]
        print(f"answers: {n} replies applied in {answer_s:.2f}s; resolved with the right option: {len(settled)}/{n}")
        # The settled edits go out once the room is quiet: wait until each has logged its request_timing.
        t2 = time.perf_counter()
        while st.log_path.read_text(errors="replace").count("event='request_timing'") < n:
            if time.perf_counter() - t2 > 600:
                break
            await asyncio.sleep(1.0)
        print(f"edits: all sent {time.perf_counter() - t2:.1f}s after the last answer was applied")
        await asyncio.sleep(5)  # the keycap clean-up behind them
        base_s += await baseline(hs, st.room_id, st.carol.token, st.carol.user_id, n - n // 2, "b")
        print(f"baseline: plain nio, {n} sends x{SEND_CONCURRENCY}: {base_s:.2f}s = {n / base_s:.1f} msg/s")
        events = await room_events(st.alice.client, st.room_id)
        posted = Counter(content(e).get("request_id") for e in events if st.is_prompt(e))
        edits = Counter(rel(e).get("event_id") for e in events
                        if e.get("sender") == st.bot_id and rel(e).get("rel_type") == "m.replace")
        lost = sum(1 for rid in ids if posted.get(rid, 0) == 0) + (n - len(settled))
        doubled = sum(1 for c in posted.values() if c > 1) + sum(1 for c in edits.values() if c > 1)
        assert st.daemon is not None
        rss = peak_rss_mb(st.daemon.pid)
        ratio = (n / post_s) / (n / base_s)
        print(f"lost: {lost}  doubled: {doubled}  (both must be 0)")
        print(f"posting throughput ratio product/baseline: {ratio:.2f} (target >= 0.9)")
        print(f"daemon peak RSS: {rss:.1f} MB (target < 150 MB)")
        print(json.dumps({"requests": n, "sessions": sessions, "baseline_msgs_per_s": round(n / base_s, 1),
                          "prompts_per_s": round(n / post_s, 1), "ratio": round(ratio, 2), "lost": lost,
                          "doubled": doubled, "peak_rss_mb": round(rss, 1)}))
        return 0 if lost == 0 and doubled == 0 else 1
    finally:
        await st.teardown()
        hs.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
