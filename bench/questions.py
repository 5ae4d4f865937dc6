"""A question against a plain permission in the same run: what asking a question costs (issue 33).

    .venv/bin/python bench/questions.py [--rounds 40] [--blocks 4]

Real Synapse on loopback, one daemon (tests/support). A permission round, timed on the bench's clock over the
HTTP API: submitted -> the prompt seen by the room's answerer (a plain matrix-nio client) -> her reply "1" ->
the long-poll answered. A question round: Claude Code's one-question ``AskUserQuestion`` hook input posted to
``POST /hooks/claude-code`` (held) -> the question's prompt seen -> her reply "2" -> the hook's answer (the
``updatedInput.answers`` Claude Code reads) received. Blocks of each alternate (both see the same load drift).
Prints median and p90 of each and the ratios question / permission, then one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.latency import Peer, pct
from bench.rooms import timed_round
from bot.demo.homeserver import Homeserver
from tests.support.station import AGENT_TOKEN, V2, Station

FIX = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "questions"


def question_input(sid: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIX / "hook-PermissionRequest-AskUserQuestion.json").read_text())
    data["session_id"] = sid
    data["cwd"] = "/work/proj"
    data["tool_input"]["questions"] = data["tool_input"]["questions"][:1]
    return data


async def question_round(st: Station, peer: Peer, sid: str) -> float:
    """One question: the hook input posted (held), its prompt seen, replied "2", the hook answered (ms)."""
    start = len(peer.events)
    t0 = time.perf_counter()
    call = asyncio.ensure_future(st.ahttp("POST", "/hooks/claude-code", question_input(sid), token=AGENT_TOKEN[1]))
    ev, _ = await peer.next_matching(
        lambda e: e.get("sender") == st.bot_id and isinstance(e.get("content"), dict)
        and e["content"].get("suite_event_type") == V2 and e["content"].get("session_id") == sid
        and (e["content"].get("m.relates_to") or {}).get("rel_type") != "m.replace", start)
    await peer.send_text("2", reply_to=ev["event_id"])
    code, out = await call
    answers = out["hookSpecificOutput"]["decision"]["updatedInput"]["answers"]
    assert code == 200 and answers == {"Which database should we use?": "SQLite"}, out
    return (time.perf_counter() - t0) * 1000


async def compare(st: Station, peer: Peer, rounds: int, blocks: int) -> tuple[list[float], list[float]]:
    perm: list[float] = []
    asked: list[float] = []
    per = max(1, rounds // blocks)
    for b in range(blocks):
        for r in range(per):
            perm.append(await timed_round(st, peer, f"p{b}r{r}", token=AGENT_TOKEN[1]))
        await asyncio.sleep(3.5)  # the held edits go out between blocks, after each kind alike
        for r in range(per):
            asked.append(await question_round(st, peer, f"q{b}r{r}"))
        await asyncio.sleep(3.5)
    return perm, asked


def report(perm: list[float], asked: list[float]) -> dict[str, Any]:
    pm, qm, p90, q90 = statistics.median(perm), statistics.median(asked), pct(perm, 0.9), pct(asked, 0.9)
    print(f"permission ask -> answer:        median {pm:.1f} ms, p90 {p90:.1f} ms, n={len(perm)}")
    print(f"question   ask -> answer (hook): median {qm:.1f} ms, p90 {q90:.1f} ms, n={len(asked)}")
    print(f"ratio question / permission: median {qm / pm:.2f}, p90 {q90 / p90:.2f}")
    return {"permission_median_ms": round(pm, 1), "permission_p90_ms": round(p90, 1),
            "question_median_ms": round(qm, 1), "question_p90_ms": round(q90, 1),
            "ratio_median": round(qm / pm, 2), "ratio_p90": round(q90 / p90, 2)}


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=40, help="rounds of each kind")
    ap.add_argument("--blocks", type=int, default=4, help="blocks of each kind, alternating")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pb-questions-"))
    hs = Homeserver(work / "synapse")
    st = Station(hs, work / "station")
    peer: Peer | None = None
    hs.start()
    try:
        await st.setup()
        peer = Peer(hs.url, st.alice.user_id, st.alice.token, st.room_id)
        await peer.start()
        for r in range(3):  # warm up
            await timed_round(st, peer, f"warm{r}", token=AGENT_TOKEN[1])
            await question_round(st, peer, f"warmq{r}")
        perm, asked = await compare(st, peer, a.rounds, a.blocks)
        print(json.dumps({"rounds": a.rounds, "blocks": a.blocks, **report(perm, asked)}))
        return 0
    finally:
        if peer is not None:
            await peer.close()
        await st.teardown()
        hs.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
