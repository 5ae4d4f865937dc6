"""What a phone pays per prompt: the events of one request's whole life in the station room, and their
bytes, on each path (text, reaction, session, timeout, cancel), against the least possible.

    .venv/bin/python bench/phone.py [--rounds 2] [--no-seed-reactions]

Real Synapse on loopback, a plain (unencrypted) room, the test station's bot and alice. Each path, each
round: a request is submitted over the HTTP API; alice (a person on a phone, not a script) answers ~3 s
after the prompt arrives (so the keycaps are seeded, as for any answer slower than a second): a reply
``1`` (text), the 1️⃣ reaction (reaction), a reply ``s`` (session: allow for this session), nothing
(timeout: ``prompts.timeout`` is 12 s here), or the agent cancels (cancel). Then the room is left until
nothing more about the prompt arrives for 5 s (the bot's background work, seeding and clean-up, waits
for a quiet room).

Counted, from alice's ``/messages`` afterwards (what a client that was away downloads): the prompt and
every message, reaction and redaction after it (one request at a time runs: they are all its life), with
the bytes of their ``content`` as the server hands them out (compact JSON; a redacted event's content
is empty). ``bot`` is how many of them the bot sent. The least possible is
the prompt, the answer and one edit (timeout and cancel: the prompt and the edit); ``least B`` is
what those three weigh here, ``edit B`` and ``prompt B`` the two alone; ``wire B`` all the events whole
(ids, sender, timestamps, ``unsigned``: what the client's download carries).
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
import urllib.parse
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.answers import KEYCAPS  # noqa: E402
from bot.demo.homeserver import Homeserver, http  # noqa: E402
from tests.support.station import Station, request_body  # noqa: E402

PATHS = ("text", "reaction", "session", "timeout", "cancel")
THINK = 3.0  # seconds alice takes to answer
SETTLE = 5.0  # nothing new about the prompt for this long: its life is over
TIMEOUT = "12s"


def size(ev: dict[str, Any]) -> int:
    return len(json.dumps(ev.get("content") or {}, separators=(",", ":"), ensure_ascii=False).encode())


TIMELINE = ("m.room.message", "m.reaction", "m.room.redaction", "m.room.encrypted")


def belonging(events: list[dict[str, Any]], prompt_id: str) -> list[dict[str, Any]]:
    """The prompt and every message, reaction and redaction after it: one request at a time runs here, so
    all of them are its life (a redacted reaction no longer says what it related to)."""
    at = next((i for i, e in enumerate(events) if e["event_id"] == prompt_id), None)
    return [] if at is None else [e for e in events[at:] if e.get("type") in TIMELINE]


def room_events(st: Station) -> list[dict[str, Any]]:
    """The room's recent timeline, oldest first, as alice's client downloads it."""
    q = urllib.parse.urlencode({"dir": "b", "limit": "400"})
    r = http("GET", f"{st.hs.url}/_matrix/client/v3/rooms/{urllib.parse.quote(st.room_id)}/messages?{q}",
             token=st.alice.token)
    return list(reversed(r.get("chunk", [])))


async def life_of(st: Station, prompt_id: str) -> list[dict[str, Any]]:
    """The prompt's events once nothing more arrives for SETTLE seconds (at most a minute)."""
    last: list[str] = []
    quiet_since = time.monotonic()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        evs = belonging(await asyncio.to_thread(room_events, st), prompt_id)
        ids = [e["event_id"] for e in evs]
        if ids != last:
            last, quiet_since = ids, time.monotonic()
        elif time.monotonic() - quiet_since >= SETTLE:
            return evs
        await asyncio.sleep(0.5)
    return evs


async def one(st: Station, path: str, n: int) -> dict[str, Any]:
    sid = f"phone-{path}-{n}-{int(time.time() * 1000)}"
    rec, prompt = await st.submit(request_body(sid))
    await asyncio.sleep(THINK)
    if path == "text":
        await st.alice.text("1", reply_to=prompt["event_id"])
    elif path == "reaction":
        await st.alice.react(prompt["event_id"], KEYCAPS[0])
    elif path == "session":
        await st.alice.text("s", reply_to=prompt["event_id"])
    elif path == "cancel":
        await st.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "cancel"})
    got = await st.record(rec["id"], 40)
    assert got["state"] != "pending", (path, got)
    evs = await life_of(st, prompt["event_id"])
    bot = [e for e in evs if e.get("sender") == st.bot_id]
    edit = [e for e in bot if ((e.get("content") or {}).get("m.relates_to") or {}).get("rel_type") == "m.replace"]
    answer = [e for e in evs if e.get("sender") == st.alice.user_id and e.get("type") != "m.room.redaction"]
    first = next(e for e in evs if e["event_id"] == prompt["event_id"])
    least = [first, *edit[:1], *answer[:1]]
    kinds: dict[str, int] = {}
    for e in bot:
        k = e["type"].removeprefix("m.room.")
        rel = ((e.get("content") or {}).get("m.relates_to") or {}).get("rel_type")
        k = "edit" if rel == "m.replace" else k
        k = "notice" if (e.get("content") or {}).get("msgtype") == "m.notice" else k
        kinds[k] = kinds.get(k, 0) + 1
    return {
        "path": path, "events": len(evs), "bytes": sum(size(e) for e in evs), "bot": len(bot),
        "wire": sum(len(json.dumps(e, separators=(",", ":"), ensure_ascii=False).encode()) for e in evs),
        "least": 2 if path in ("timeout", "cancel") else 3, "least_bytes": sum(size(e) for e in least),
        "prompt_bytes": size(first), "edit_bytes": size(edit[0]) if edit else 0, "state": got["state"],
        "kinds": kinds,
    }


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-seed-reactions", action="store_true", help="measure without keycap seeding")
    ap.add_argument("--clear-reactions", action="store_true", help="prompts.clear_reactions = true (redact seeds)")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pb-phone-"))
    hs = Homeserver(work / "synapse")
    hs.start()
    st = Station(hs, work / "station")
    st.prompts["timeout"] = TIMEOUT
    st.prompts["on_timeout"] = "reject"
    if a.no_seed_reactions:
        st.prompts["seed_reactions"] = False
    if a.clear_reactions:
        st.prompts["clear_reactions"] = True
    rows: list[dict[str, Any]] = []
    try:
        await st.setup()
        for n in range(a.rounds):
            for path in PATHS:
                await st.drain()
                rows.append(await one(st, path, n))
    finally:
        await st.teardown()
        hs.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"{'path':9} {'events':>6} {'least':>5} {'bot':>4} {'bytes':>6} {'least B':>7} {'prompt B':>8} "
          f"{'edit B':>6} {'wire B':>6}  bot's events")
    for path in PATHS:
        mine = [r for r in rows if r["path"] == path]
        med = {k: statistics.median(r[k] for r in mine)
               for k in ("events", "least", "bot", "bytes", "least_bytes", "prompt_bytes", "edit_bytes", "wire")}
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(mine[-1]["kinds"].items()))
        print(f"{path:9} {med['events']:6.0f} {med['least']:5.0f} {med['bot']:4.0f} {med['bytes']:6.0f} "
              f"{med['least_bytes']:7.0f} {med['prompt_bytes']:8.0f} {med['edit_bytes']:6.0f} {med['wire']:6.0f}"
              f"  {kinds}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
