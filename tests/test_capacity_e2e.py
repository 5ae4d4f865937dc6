"""An agent token cannot take the API's capacity (loopback only, bounded, ends by itself).

With one agent token: 530 ``POST /permissions`` trickling their bodies a byte a second, or 530
``POST /hooks/claude-code`` held until settled. Meanwhile /healthz, /metrics, a decider's
decision, ``GET /permissions``, ``permissions ls`` and another agent token's submit all answer;
the flood gets 429 (or 408 at the body deadline), never a 2xx."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from bot.api.limits import BODY_TIMEOUT, PER_AGENT
from tests.support.station import AGENT_B_TOKEN, AGENT_TOKEN, DECIDER_TOKEN, Station, request_body
from tests.test_hooks_e2e import hook_input

pytestmark = pytest.mark.e2e

FLOOD = 530
AGENT, AGENT_B, DECIDER = AGENT_TOKEN[1], AGENT_B_TOKEN[1], DECIDER_TOKEN[1]
Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


def _head(path: str, length: int) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {AGENT}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n").encode()


async def _flood(station: Station, first: list[bytes]) -> list[Conn]:
    """Open one connection per entry of ``first`` and send it; a connection the daemon closes stays in the list."""
    out: list[Conn] = []
    for i in range(0, len(first), 100):
        batch = await asyncio.gather(*(asyncio.open_connection("127.0.0.1", station.api_port)
                                       for _ in first[i:i + 100]))
        for (_, w), data in zip(batch, first[i:i + 100], strict=True):
            w.write(data)
        out += batch
    return out


async def _status(r: asyncio.StreamReader) -> int | None:
    """The status code the daemon answered on ``r``, or None when it closed without one."""
    try:
        line = await r.readline()
    except ConnectionError:
        return None
    return int(line.split()[1]) if line.startswith(b"HTTP/1.1 ") else None


def _close(conns: list[Conn]) -> None:
    for _, w in conns:
        w.close()


async def _others_are_served(station: Station, sid: str) -> None:
    """What must keep answering 200 while one agent token floods."""
    st, _ = await station.ahttp("GET", "/healthz", token=None, timeout=30)
    assert st == 200
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http:
        async with http.get(f"{station.api_url}/metrics") as resp:
            assert resp.status == 200 and b"permission_bot_pending" in await resp.read()
    st, rec = await station.ahttp("POST", "/permissions", request_body(sid), token=AGENT_B, timeout=30)
    assert st == 201, rec  # another agent token still submits
    st, listed = await station.ahttp("GET", f"/permissions?session={sid}", token=DECIDER, timeout=30)
    assert st == 200 and [r["id"] for r in listed] == [rec["id"]]
    st, listed = await station.ahttp("GET", "/permissions", token=AGENT_B, timeout=30)
    assert st == 200
    ls = await asyncio.to_thread(station.cli, "permissions", "ls", env={"PERMISSION_BOT_TOKEN": DECIDER})
    assert ls.returncode == 0 and rec["id"] in ls.stdout, ls.stderr
    st, got = await station.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "deny"}, token=DECIDER,
                                  timeout=30)
    assert st == 200 and got["state"] != "pending", got


@pytest.fixture
async def closing() -> AsyncIterator[list[Conn]]:
    conns: list[Conn] = []
    yield conns
    _close(conns)


async def test_530_trickled_agent_bodies_starve_nobody(station: Station, sid: str, closing: list[Conn]) -> None:
    body = json.dumps(request_body(sid + "_flood")).encode()
    closing += await _flood(station, [_head("/permissions", len(body)) + body[:1]] * FLOOD)

    async def trickle() -> None:  # a byte a second, never the whole body; ends by itself
        for i in range(1, int(BODY_TIMEOUT) + 5):
            for _, w in closing:
                if not w.is_closing():
                    w.write(body[i:i + 1])
            await asyncio.sleep(1)

    dripping = asyncio.ensure_future(trickle())
    try:
        await _others_are_served(station, sid)
        codes = await asyncio.wait_for(asyncio.gather(*(_status(r) for r, _ in closing)), BODY_TIMEOUT + 30)
    finally:
        dripping.cancel()
    seen = {c: codes.count(c) for c in set(codes)}
    print(f"\nmeasured: {FLOOD} trickled agent POSTs answered {seen}")
    assert set(codes) <= {408, 429, None}, seen  # never stored: refused, past the deadline, or closed
    assert 0 < seen.get(408, 0) <= PER_AGENT and seen.get(429, 0) >= FLOOD - PER_AGENT - 100, seen
    _, pending = await station.ahttp("GET", f"/permissions?session={sid}_flood")
    assert pending == []
    st, rec = await station.ahttp("POST", "/permissions", request_body(sid + "_after"), token=AGENT)
    assert st == 201, rec  # the token's budget is whole again
    await station.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "cancel"}, token=AGENT)


async def test_530_held_agent_hooks_starve_nobody(station: Station, sid: str, closing: list[Conn]) -> None:
    first = []
    for i in range(FLOOD):
        data = json.dumps(hook_input("claude-code-http-PermissionRequest-Bash", f"{sid}_h", command=f"touch f{i}"))
        first.append(_head("/hooks/claude-code", len(data)) + data.encode())
    closing += await _flood(station, first)
    await _others_are_served(station, sid)
    reads = [asyncio.ensure_future(_status(r)) for r, _ in closing]
    done, held = await asyncio.wait(reads, timeout=5)  # the refused answer at once; the held ones never
    codes = [t.result() for t in done]
    seen = {c: codes.count(c) for c in set(codes)}
    print(f"\nmeasured: {FLOOD} held agent hooks: {len(held)} held, the rest answered {seen}")
    assert set(codes) <= {429, None}, seen
    assert len(held) <= PER_AGENT and seen.get(429, 0) >= FLOOD - PER_AGENT - 100, seen
    _close(closing)  # the hooks hang up: their requests are withdrawn
    await asyncio.gather(*reads, return_exceptions=True)
    for _ in range(300):
        _, pending = await station.ahttp("GET", f"/permissions?session={sid}_h")
        if not pending:
            break
        await asyncio.sleep(0.1)
    assert pending == []
    st, rec = await station.ahttp("POST", "/permissions", request_body(sid + "_after"), token=AGENT)
    assert st == 201, rec
    await station.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "cancel"}, token=AGENT)


async def test_a_slow_body_gets_408_with_a_reason(station: Station, sid: str) -> None:
    body = json.dumps({"decision": "approve", "feedback": "x" * 100}).encode()
    r, w = await asyncio.open_connection("127.0.0.1", station.api_port)
    try:
        head = _head("/permissions/x:1", len(body)).replace(AGENT.encode(), DECIDER.encode())
        w.write(head + body[:10])  # a decider's too: the deadline is for everyone
        head_s = (await r.readuntil(b"\r\n\r\n"))[:-4]
        length = next(int(h.split(b":")[1]) for h in head_s.split(b"\r\n") if h.lower().startswith(b"content-length:"))
        rest = await r.readexactly(length)  # not up to EOF: aiohttp lingers 10 s more for the body it never got
    finally:
        w.close()
    assert head_s.startswith(b"HTTP/1.1 408") and b"Connection: close" in head_s, head_s
    err: dict[str, Any] = json.loads(rest)
    assert err["error"] == "body_timeout" and "within" in err["reason"]
