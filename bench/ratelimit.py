"""Rate limit: the bot on a Synapse with the default message limit (``rc_message`` 0.2/s, burst 10), not exempt.

    .venv/bin/python bench/ratelimit.py [--burst 20] [--minutes 3] [--every 10] [--answer-after 3] [--unlimited]

Real Synapse on loopback (tests/support/limited.py; ``--unlimited``: the tests' unlimited one, for comparison),
the daemon as a subprocess, alice a synced client whose clock stamps each event as it arrives. Two parts, the
limit given time to refill between them:

(a) a burst of ``--burst`` requests at once: the k-th prompt's time after the burst against the prompts-only
    floor (10 at once, then one every 5 s) [k-th <= 1.5x floor for k > 10], and the order they came in
    (inversions, the largest displacement) [in submit order within the homeserver's own reordering];
(b) one request every ``--every`` s for ``--minutes``, alice answering "1" ``--answer-after`` s after its prompt:
    submit -> prompt [p90 <= 2 s], alice's answer sent -> the prompt's edit seen [p90 <= 10 s], answer sent ->
    the agent's long-poll answered [<= 2 s]; with the refusals the daemon met and the events it sent a prompt.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.demo.homeserver import Homeserver  # noqa: E402
from tests.support.human import content, rel  # noqa: E402
from tests.support.limited import LIMITED_SYNAPSE, floor  # noqa: E402
from tests.support.station import Station, request_body  # noqa: E402


def pct(xs: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank)."""
    return sorted(xs)[max(0, min(len(xs), round(q * len(xs))) - 1)]


def line(name: str, xs: list[float], target: str = "") -> str:
    return (f"  {name:<28} median {statistics.median(xs):7.2f} s   p90 {pct(xs, 0.9):7.2f} s   "
            f"max {max(xs):7.2f} s   (n={len(xs)}) {target}")


class Clock:
    """When alice's client first had each event (the bench's clock), stamped every 10 ms."""

    def __init__(self, st: Station) -> None:
        self.st = st
        self.seen: dict[str, float] = {}
        self.n = 0  # events stamped so far
        self.task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        await self.st.alice.follow()
        while True:
            now, events = time.monotonic(), self.st.alice.events
            for ev in events[self.n:]:
                self.seen.setdefault(ev["event_id"], now)
            self.n = len(events)
            await asyncio.sleep(0.01)

    async def first(self, pred: Any, timeout: float = 600) -> tuple[dict[str, Any], float]:
        ev = await self.st.alice.wait(pred, timeout)
        assert ev is not None, "no such event in time"
        while ev["event_id"] not in self.seen:
            await asyncio.sleep(0.005)
        return ev, self.seen[ev["event_id"]]


def prompt_of(st: Station, rid: str) -> Any:
    return lambda e: st.is_prompt(e) and content(e).get("request_id") == rid


def edit_of(st: Station, event_id: str) -> Any:
    return lambda e: (e.get("sender") == st.bot_id and rel(e).get("rel_type") == "m.replace"
                      and rel(e).get("event_id") == event_id)


def refusals(st: Station) -> int:
    _, h = st.http("GET", "/healthz")
    return int((h.get("rate_limit") or {}).get("refusals", 0))


async def burst(st: Station, clock: Clock, n: int) -> dict[str, Any]:
    """(a): ``n`` requests at once; each prompt's time after the first submit, and the room's order."""
    t0 = time.monotonic()
    rids = []
    for i in range(n):
        code, rec = await st.ahttp("POST", "/permissions", request_body("burst", tool_call_id=f"b{i}"))
        assert code == 201, rec
        rids.append(rec["id"])
    seen = [await clock.first(prompt_of(st, rid)) for rid in rids]
    times = [t - t0 for _, t in seen]
    room = sorted(range(n), key=lambda k: (seen[k][1], k))
    inversions = sum(1 for i in range(n) for j in range(i + 1, n) if room[i] > room[j])
    displaced = max(abs(pos - k) for pos, k in enumerate(room))
    print(f"(a) burst of {n}: k-th prompt after the burst, against the floor (10 at once, then one per 5 s)")
    ratios = []
    for k, t in enumerate(times, 1):
        f = floor(k)
        r = t / f if f else None
        if r is not None:
            ratios.append(r)
        print(f"  {k:3d}: {t:6.1f} s   floor {f:5.1f} s" + (f"   ratio {r:.2f}" if r is not None else ""))
    print(f"  ratio to the floor (k > 10): median {statistics.median(ratios):.2f}, max {max(ratios):.2f} [<= 1.5]")
    print(f"  order: {inversions} inversions, largest displacement {displaced} (room order: {[k + 1 for k in room]})")
    # left pending (replies name their prompt): cancelling would spend the budget (b) starts with
    return {"ratio_median": statistics.median(ratios), "ratio_max": max(ratios), "inversions": inversions,
            "displaced": displaced}


async def steady(st: Station, clock: Clock, minutes: float, every: float, after: float) -> None:
    """(b): one request every ``every`` s, each answered ``after`` s after its prompt."""
    before, start = refusals(st), len(st.alice.events)
    rows: list[tuple[float, float, float]] = []

    async def one(i: int) -> None:
        t0 = time.monotonic()
        code, rec = await st.ahttp("POST", "/permissions", request_body("steady", tool_call_id=f"s{i}"))
        assert code == 201, rec
        poll = asyncio.create_task(st.ahttp("GET", f"/permissions/{rec['id']}?wait=120"))
        prompt, seen = await clock.first(prompt_of(st, rec["id"]))
        await asyncio.sleep(max(0.0, seen + after - time.monotonic()))
        await st.alice.text("1", reply_to=prompt["event_id"])
        answered = time.monotonic()
        code, got = await poll
        agent = time.monotonic()
        assert code == 200 and got["state"] == "resolved", got
        _, edited = await clock.first(edit_of(st, prompt["event_id"]))
        rows.append((seen - t0, edited - answered, agent - answered))

    tasks = []
    n = int(minutes * 60 // every)
    t_start = time.monotonic()
    for i in range(n):
        await asyncio.sleep(max(0.0, t_start + i * every - time.monotonic()))
        tasks.append(asyncio.create_task(one(i)))
    await asyncio.gather(*tasks)
    bot = [e for e in st.alice.events[start:] if e.get("sender") == st.bot_id]
    reactions = sum(1 for e in bot if e.get("type") == "m.reaction")
    print(f"(b) one request every {every:g} s for {minutes:g} min, answered {after:g} s after its prompt:")
    print(line("submit -> prompt", [r[0] for r in rows], "[p90 <= 2 s]"))
    print(line("answer -> edit", [r[1] for r in rows], "[p90 <= 10 s]"))
    print(line("answer -> agent", [r[2] for r in rows], "[<= 2 s]"))
    print(f"  bot events {len(bot)} for {n} prompts ({len(bot) / n:.2f} a prompt; keycaps {reactions}), "
          f"refusals for rate {refusals(st) - before}")


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--burst", type=int, default=20)
    ap.add_argument("--minutes", type=float, default=3.0)
    ap.add_argument("--every", type=float, default=10.0)
    ap.add_argument("--answer-after", type=float, default=3.0)
    ap.add_argument("--refill", type=float, default=60.0, help="seconds between the parts (the limit refills)")
    ap.add_argument("--unlimited", action="store_true", help="the tests' unlimited Synapse instead")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pb-ratelimit-"))
    hs = Homeserver(work / "synapse", overrides={"bcrypt_rounds": 4} if a.unlimited else LIMITED_SYNAPSE)
    hs.start()
    st = Station(hs, work / "station")
    try:
        await st.setup()
        clock = Clock(st)
        print(f"Synapse {'unlimited' if a.unlimited else 'with the default rc_message (0.2/s, burst 10)'}")
        await asyncio.sleep(10)  # the bot's join was one of its account's events: its token back first
        await burst(st, clock, a.burst)
        await asyncio.sleep(a.refill)
        await steady(st, clock, a.minutes, a.every, a.answer_after)
        _, h = st.http("GET", "/healthz")
        print(f"  /healthz rate_limit: {h.get('rate_limit')}")
        clock.task.cancel()
    finally:
        await st.teardown()
        hs.stop()


if __name__ == "__main__":
    asyncio.run(main())
