"""Many station rooms, for bench/latency.py ``--rooms N`` and bench/scale.py ``--rooms N``: a station whose
bot serves N rooms (the default one and N-1 ``[[rooms]]``), alice answering in each, one agent token per room.

Latency: request -> prompt seen -> reply "1" -> the long-poll answered, timed on the bench's clock over the
HTTP API, sequential rounds; blocks of one-room rounds (all in the default room) alternate with blocks spread
over the N rooms (round-robin), so both see the same load; the ratios of the N-room figures to the one-room
ones (median, p90) are what --rooms measures.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

from bot.demo.homeserver import Homeserver
from tests.support.station import AGENT_TOKEN, V2, Station, request_body


def room_token(i: int) -> tuple[str, str]:
    """Room ``i``'s agent token (room 0, the default room, uses agent-a)."""
    return AGENT_TOKEN if i == 0 else (f"bench-room{i}", f"bench-room-{i}-agent-token-0123456789")


class ManyRooms(Station):
    """The test station plus ``n - 1`` more rooms (``room1``...), alice the answerer of every one."""

    def __init__(self, hs: Homeserver, workdir: Path, n: int) -> None:
        super().__init__(hs, workdir)
        self.n = n
        self.room_ids: list[str] = []

    async def setup(self) -> None:
        self.make_people_and_room()
        self.room_ids = [self.room_id] + [
            self.hs.create_room(self.alice.token, invite=[self.bot_id], name=f"room{i}") for i in range(1, self.n)
        ]
        parts = []
        for i in range(1, self.n):
            name, secret = room_token(i)
            parts.append(
                f'[[rooms]]\nname = "room{i}"\nroom = "{self.room_ids[i]}"\n'
                f'answerers = {{ users = ["{self.alice.user_id}"] }}\ntokens = ["{name}"]\n\n'
                f'[[api.tokens]]\nname = "{name}"\nrole = "agent"\nsecret = "{secret}"\n'
            )
        self.extra_config += "\n" + "\n".join(parts)
        await self.start_all()


async def round_trip(st: ManyRooms, peer: Any, room: int, sid: str) -> float:
    """One request in room ``room``: submitted, its prompt seen by ``peer``, replied "1", settled (ms)."""
    return await timed_round(st, peer, sid, token=room_token(room)[1])


async def timed_round(st: Station, peer: Any, sid: str, **kw: Any) -> float:
    """One request (``kw``: ``ahttp``'s, e.g. the token): submitted, its prompt seen by ``peer``, replied "1",
    the long-poll answered (ms, on the bench's clock)."""
    start = len(peer.events)
    t0 = time.perf_counter()
    code, rec = await st.ahttp("POST", "/permissions", request_body(sid), **kw)
    assert code == 201, rec
    ev, _ = await peer.next_matching(
        lambda e: e.get("sender") == st.bot_id and isinstance(e.get("content"), dict)
        and e["content"].get("suite_event_type") == V2 and e["content"].get("request_id") == rec["id"]
        and (e["content"].get("m.relates_to") or {}).get("rel_type") != "m.replace", start)
    await peer.send_text("1", reply_to=ev["event_id"])
    code, got = await st.ahttp("GET", f"/permissions/{rec['id']}?wait=60")
    assert code == 200 and got["state"] == "resolved", got
    return (time.perf_counter() - t0) * 1000


async def compare(st: ManyRooms, peers: list[Any], rounds: int, blocks: int) -> tuple[list[float], list[float]]:
    """(one-room rounds, N-room rounds), in alternating blocks."""
    one: list[float] = []
    many: list[float] = []
    per = max(1, rounds // blocks)
    n = 0
    for b in range(blocks):
        for _ in range(per):
            one.append(await round_trip(st, peers[0], 0, f"one{b}"))
        for _ in range(per):
            room = n % st.n
            n += 1
            many.append(await round_trip(st, peers[room], room, f"many{b}r{room}"))
        await asyncio.sleep(3.5)  # the held edits go out between blocks, in both phases alike
    return one, many


def report(one: list[float], many: list[float], pct: Any, n: int) -> dict[str, float]:
    om, mm, o90, m90 = statistics.median(one), statistics.median(many), pct(one, 0.9), pct(many, 0.9)
    print(f"one room  (default room only):  median {om:.1f} ms, p90 {o90:.1f} ms, n={len(one)}")
    print(f"{n} rooms (round-robin):          median {mm:.1f} ms, p90 {m90:.1f} ms, n={len(many)}")
    print(f"ratio {n} rooms / one room: median {mm / om:.2f}, p90 {m90 / o90:.2f}")
    return {"one_median_ms": round(om, 1), "one_p90_ms": round(o90, 1), "rooms_median_ms": round(mm, 1),
            "rooms_p90_ms": round(m90, 1), "ratio_median": round(mm / om, 2), "ratio_p90": round(m90 / o90, 2)}
