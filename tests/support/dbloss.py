"""Steady load on daemons whose database goes away (issue 36), shared by tests/test_dbloss_e2e.py and
bench/dbloss.py: an agent submitting through whichever daemon answers (a refused submission retried with
the same body and key, as the ACP proxy does: one request however often it is sent, also when a 503 came
after it was stored), alice answering each prompt once, and the counts that say whether anything was lost
or doubled."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from tests.support.human import rel
from tests.support.station import AGENT_TOKEN, TOKEN, Station, request_body


@dataclass
class Seen:
    """What the load saw: the requests accepted, and each 503 (with its Retry-After) on the way."""

    ids: list[str] = field(default_factory=list)
    refused: list[tuple[int, str | None]] = field(default_factory=list)  # (status, Retry-After)
    other: list[tuple[int, str]] = field(default_factory=list)  # any other failure status: none expected


async def call(st: Station, method: str, path: str, body: Any = None, token: str = AGENT_TOKEN[1],
               timeout: float = 10) -> tuple[int, dict[str, str], Any]:
    """One API call: (status, headers, JSON body or text); status 0 when the daemon cannot be reached."""
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as http, http.request(
            method, st.api_url + path, json=body, headers={"Authorization": f"Bearer {token}"}
        ) as r:
            text = await r.text()
            try:
                data: Any = await r.json(content_type=None)
            except ValueError:
                data = text
            return r.status, dict(r.headers), data
    except (aiohttp.ClientError, TimeoutError):
        return 0, {}, None


async def submit_until_taken(daemons: list[Station], body: dict[str, Any], seen: Seen) -> dict[str, Any]:
    """Submit ``body`` through one daemon after another until one takes it (201, or 200: already taken)."""
    i = 0
    while True:
        st = daemons[i % len(daemons)]
        code, headers, rec = await call(st, "POST", "/permissions", body)
        if code in (200, 201):
            if rec["id"] not in seen.ids:
                seen.ids.append(rec["id"])
            return dict(rec)
        if code == 503:
            seen.refused.append((code, headers.get("Retry-After")))
        elif code:
            seen.other.append((code, str(rec)[:300]))
        i += 1
        await asyncio.sleep(0.2)


async def load(daemons: list[Station], sid: str, rate: float, stop: asyncio.Event, seen: Seen) -> None:
    """``rate`` new requests a second until ``stop``."""
    i = 0
    while not stop.is_set():
        await submit_until_taken(daemons, request_body(sid, tool_call_id=f"c{i}", key=f"load:{i}"), seen)
        i += 1
        await asyncio.sleep(1 / rate)


async def answer(st: Station, sid: str, stop: asyncio.Event) -> None:
    """alice replies "1" to each prompt of session ``sid`` once, until ``stop``."""
    done: set[str] = set()
    while not stop.is_set():
        for e in st.alice.find(lambda e: st.is_prompt(e) and e["content"].get("session_id") == sid):
            if e["event_id"] not in done:
                done.add(e["event_id"])
                await st.alice.text("1", reply_to=e["event_id"])
        await asyncio.sleep(0.05)


def counts(st: Station, sid: str) -> tuple[Counter[str], Counter[str]]:
    """Prompts per request of session ``sid``, and settled edits per prompt of it, as the room shows them."""
    prompts = [e for e in st.alice.events if st.is_prompt(e) and e["content"].get("session_id") == sid]
    ids = {p["event_id"] for p in prompts}
    edits = Counter(
        rel(e)["event_id"] for e in st.alice.events
        if e.get("sender") == st.bot_id and rel(e).get("rel_type") == "m.replace" and rel(e).get("event_id") in ids
    )
    return Counter(p["content"]["request_id"] for p in prompts), edits


async def settled_all(reader: list[Station], ids: list[str], wait: float = 60) -> list[dict[str, Any]]:
    """Each request's record once settled (the first daemon that answers; long-polls up to ``wait``)."""
    out = []
    for rid in ids:
        while True:
            for st in reader:
                code, _, rec = await call(st, "GET", f"/permissions/{rid}?wait={wait}", token=TOKEN,
                                          timeout=wait + 10)
                if code == 200:
                    break
            else:
                await asyncio.sleep(0.5)
                continue
            out.append(rec)
            break
    return out
