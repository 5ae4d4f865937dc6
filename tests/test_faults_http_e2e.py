"""Floods on the HTTP API (loopback only, bounded): 1,100 idle sockets, 1,100 parked long-polls and
a slow head. /healthz and authenticated submits keep answering, the log stays short, sockets that
send nothing are closed, long-polls beyond the cap get 503 with Retry-After."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from bot.api.limits import HEADER_TIMEOUT, MAX_LONG_POLLS
from tests.support.station import Station, request_body

pytestmark = pytest.mark.e2e

FLOOD = 1100


async def _open(station: Station, n: int) -> list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    out = []
    for i in range(0, n, 100):
        out += await asyncio.gather(*(asyncio.open_connection("127.0.0.1", station.api_port)
                                      for _ in range(min(100, n - i))))
    return out


def _close(conns: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]) -> None:
    for _, w in conns:
        w.close()


async def _timed(station: Station, method: str, path: str, body: object = None) -> tuple[int, float]:
    t0 = time.monotonic()
    code, _ = await station.ahttp(method, path, body, timeout=10)
    return code, time.monotonic() - t0


def _log_size(station: Station) -> int:
    return len(station.log_path.read_text(errors="replace").splitlines())


async def test_1100_idle_sockets_starve_nothing_and_are_closed(station: Station, sid: str) -> None:
    lines = _log_size(station)
    conns = await _open(station, FLOOD)
    try:
        code, took = await _timed(station, "GET", "/healthz")
        assert code == 200 and took < 3, took
        code, took2 = await _timed(station, "POST", "/permissions", request_body(sid))
        assert code == 201 and took2 < 3, took2
        print(f"\nmeasured: {FLOOD} idle sockets: /healthz {took * 1000:.0f} ms, submit {took2 * 1000:.0f} ms")
        # every idle socket is closed by the daemon: evicted at once, or at the header-read timeout
        t0 = time.monotonic()
        eofs = await asyncio.wait_for(asyncio.gather(*(r.read() for r, _ in conns)), HEADER_TIMEOUT + 10)
        assert all(e == b"" or e.startswith(b"HTTP/1.1 503") for e in eofs)
        closed_in = time.monotonic() - t0
        assert closed_in < HEADER_TIMEOUT + 10
    finally:
        _close(conns)
    added = _log_size(station) - lines
    print(f"measured: all {FLOOD} closed by the daemon within {closed_in:.1f} s; {added} log lines")
    assert added < 100


async def test_1100_long_polls_beyond_the_cap_get_503_retry_after(station: Station, sid: str) -> None:
    _, rec = await station.ahttp("POST", "/permissions", request_body(sid))
    lines = _log_size(station)
    conns = await _open(station, FLOOD)
    try:
        auth = f"Authorization: Bearer {station.token}\r\n"  # reads need a token
        head = f"GET /permissions/{rec['id']}?wait=300 HTTP/1.1\r\nHost: x\r\n{auth}\r\n".encode()
        for _, w in conns:
            w.write(head)
        await asyncio.sleep(2)
        code, took = await _timed(station, "GET", "/healthz")
        assert code == 200 and took < 3, took
        busy = 0
        for r, _ in conns:
            try:
                first = await asyncio.wait_for(r.read(300), 0.05)
            except (TimeoutError, ConnectionError):
                continue
            if first.startswith(b"HTTP/1.1 503") and b"Retry-After: 2" in first:
                busy += 1
        assert busy >= FLOOD - MAX_LONG_POLLS - 600, busy  # the rest: evicted before their head was read
        code, took2 = await _timed(station, "POST", f"/permissions/{rec['id']}", {"decision": "approve"})
        assert code == 200 and took2 < 3, took2
    finally:
        _close(conns)
    added = _log_size(station) - lines
    print(f"\nmeasured: {FLOOD} long-polls: {busy} got 503, /healthz {took * 1000:.0f} ms, "
          f"decide {took2 * 1000:.0f} ms; {added} log lines")
    assert added < 100


async def test_a_slow_head_is_closed_at_the_header_timeout(station: Station) -> None:
    """A header a second, never the blank line (slowloris): closed after HEADER_TIMEOUT, not 75 s."""
    r, w = await asyncio.open_connection("127.0.0.1", station.api_port)
    t0 = time.monotonic()
    closed_at = None
    try:
        w.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        for _ in range(int(HEADER_TIMEOUT) + 10):
            w.write(b"X-Slow: 1\r\n")
            try:
                got = await asyncio.wait_for(r.read(100), 1)
            except TimeoutError:
                continue
            if got == b"":
                closed_at = time.monotonic() - t0
                break
    except ConnectionError:
        closed_at = time.monotonic() - t0
    finally:
        w.close()
    assert closed_at is not None and closed_at < HEADER_TIMEOUT + 3, closed_at


async def _raw(station: Station, head: bytes, body: bytes = b"") -> int:
    r, w = await asyncio.open_connection("127.0.0.1", station.api_port)
    try:
        w.write(head + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        status = await asyncio.wait_for(r.readline(), 10)
        return int(status.split()[1])
    finally:
        w.close()


async def test_inputs_that_gave_500_give_4xx(station: Station, sid: str) -> None:
    """A proxy retries 5xx: a non-ASCII Authorization header and lone surrogates in label or key
    must be refused with 4xx, and nothing stored."""
    for auth in ("Bearer é".encode("latin-1"), b"Bearer \xff\xfe", "Bearer 令牌".encode()):
        code = await _raw(station, b"POST /permissions HTTP/1.1\r\nHost: x\r\nAuthorization: " + auth + b"\r\n"
                          b"Content-Type: application/json\r\n", b"{}")
        assert code == 401, (auth, code)
    for field in ("label", "key"):
        body = json.dumps(request_body(sid)).encode()[:-1] + f', "{field}": "\\ud800x"}}'.encode()
        code, err = await station.ahttp("POST", "/permissions", raw=body)
        assert code == 422 and field in err["reason"], (field, code, err)
    _, listed = await station.ahttp("GET", f"/permissions?session={sid}")
    assert listed == []
    _, rec = await station.ahttp("POST", "/permissions", request_body(sid))
    for field in ("feedback", "by"):
        raw = f'{{"decision": "approve", "{field}": "\\udc00"}}'.encode()
        code, err = await station.ahttp("POST", f"/permissions/{rec['id']}", raw=raw)
        assert code == 422 and field in err["reason"], (field, code, err)
    _, got = await station.ahttp("GET", f"/permissions/{rec['id']}")
    assert got["state"] == "pending"
