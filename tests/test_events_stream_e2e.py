"""GET /events: server-sent permission-request and permission-resolved events."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from tests.support.station import Station, request_body

pytestmark = pytest.mark.e2e


async def test_sse_carries_request_and_resolution(station: Station, sid: str) -> None:
    seen: list[tuple[str, dict]] = []
    auth = {"Authorization": f"Bearer {station.token}"}  # reads need a token too
    async with aiohttp.ClientSession() as http, http.get(station.api_url + "/events", headers=auth) as resp:
        assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/event-stream")

        async def read() -> None:
            name = ""
            async for raw in resp.content:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    data = json.loads(line[6:])
                    if data.get("session_id") == sid:
                        seen.append((name, data))
                        if len(seen) == 2:
                            return

        reader = asyncio.create_task(read())
        await asyncio.sleep(0.2)
        _, rec = await station.ahttp("POST", "/permissions", request_body(sid))
        await station.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "deny", "feedback": "no"})
        await asyncio.wait_for(reader, 15)
    assert [n for n, _ in seen] == ["permission-request", "permission-resolved"]
    assert seen[0][1]["state"] == "pending" and seen[1][1]["outcome"]["option_id"] == "reject_once"
    assert seen[1][1]["outcome"]["feedback"] == "no"


async def test_env_secrets_never_reach_the_log(station: Station, tmp_path) -> None:
    """The daemon started with its password and API token from the environment: neither, nor the
    Matrix access token it obtains, appears in any log line."""
    import os
    import sqlite3
    import subprocess

    from bot.demo.homeserver import free_port

    pw, token = "env-bot-password-7f3a9c", "env-api-token-2b8d41"
    bot = station.hs.register("permbot_env", pw)["user_id"]
    room = station.hs.create_room(station.alice.token, invite=[bot], name="env room")
    port = free_port()
    state = tmp_path / "state"
    cfg = tmp_path / "c.toml"
    cfg.write_text(f"""
[matrix]
homeserver = "{station.hs.url}"
user_id = "{bot}"
room = "{room}"
[answerers]
users = ["{station.alice.user_id}"]
[api]
listen = "127.0.0.1:{port}"
[state]
path = "{state}"
[log]
level = "debug"
""")
    env = dict(os.environ, PERMISSION_BOT_MATRIX_PASSWORD=pw, PERMISSION_BOT_API_TOKEN=token)
    log = tmp_path / "daemon.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([station.exe, "run", "--config", str(cfg)], stdout=out, stderr=subprocess.STDOUT,
                                env=env, stdin=subprocess.DEVNULL)
    try:
        import urllib.request

        body = json.dumps(request_body("envsecrets")).encode()
        rec = None
        for _ in range(200):
            try:
                req = urllib.request.Request(f"http://127.0.0.1:{port}/permissions", data=body, method="POST",
                                             headers={"Authorization": f"Bearer {token}",
                                                      "Content-Type": "application/json"})
                with urllib.request.urlopen(req, timeout=5) as r:
                    rec = json.loads(r.read())
                break
            except OSError:
                await asyncio.sleep(0.1)
        assert rec is not None
        for _ in range(200):
            get = urllib.request.Request(f"http://127.0.0.1:{port}/permissions/{rec['id']}",
                                         headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(get, timeout=5) as r:
                if json.loads(r.read()).get("prompt_event_id"):
                    break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the prompt was never posted")
    finally:
        proc.terminate()
        proc.wait(20)
    text = log.read_text(errors="replace")
    session = json.loads(sqlite3.connect(state / "inbox.sqlite3")
                         .execute("SELECT v FROM kv WHERE k='matrix.session'").fetchone()[0])
    assert "prompt_posted" in text
    for secret in (pw, token, session["access_token"]):
        assert secret not in text


async def _read_events(resp: aiohttp.ClientResponse, sid: str, want: int) -> list[tuple[str, str, dict]]:
    """(id, event, data) of this session's events (and any events-missed notice), until ``want`` are read."""
    got: list[tuple[str, str, dict]] = []
    eid = name = ""
    async for raw in resp.content:
        line = raw.decode().rstrip("\n")
        if line.startswith("id: "):
            eid = line[4:]
        elif line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data = json.loads(line[6:])
            if name == "events-missed" or data.get("session_id") == sid:
                got.append((eid, name, data))
                if len(got) == want:
                    return got
            eid = name = ""
    return got


async def test_sse_reconnect_with_last_event_id_loses_nothing(station: Station, sid: str) -> None:
    """A client that drops and comes back with Last-Event-ID gets every event it missed, in order, once."""
    url = station.api_url + "/events"
    auth = {"Authorization": f"Bearer {station.token}"}  # reads need a token
    async with aiohttp.ClientSession(headers=auth) as http:
        async with http.get(url) as resp:
            reader = asyncio.create_task(_read_events(resp, sid, 1))
            await asyncio.sleep(0.2)
            _, first = await station.ahttp("POST", "/permissions", request_body(sid, tool_call_id="c1"))
            [(last_id, name, data)] = await asyncio.wait_for(reader, 15)
        assert name == "permission-request" and data["id"] == first["id"] and last_id
        # while nobody listens: the first is settled, a second arrives
        await station.ahttp("POST", f"/permissions/{first['id']}", {"decision": "deny"})
        _, second = await station.ahttp("POST", "/permissions", request_body(sid, tool_call_id="c2"))
        async with http.get(url, headers={"Last-Event-ID": last_id}) as resp:
            got = await asyncio.wait_for(_read_events(resp, sid, 2), 15)
    assert [(n, d["id"], d["state"]) for _, n, d in got] == [
        ("permission-resolved", first["id"], "resolved"),
        ("permission-request", second["id"], "pending"),
    ]
    ids = [i for i, _, _ in got]
    assert all(ids) and len(set(ids)) == 2 and last_id not in ids


async def test_sse_last_event_id_from_elsewhere_says_events_were_missed(station: Station, sid: str) -> None:
    """An id the daemon does not know (an earlier run, garbage) is answered with events-missed first."""
    auth = {"Authorization": f"Bearer {station.token}"}  # reads need a token
    async with aiohttp.ClientSession(headers=auth) as http, http.get(station.api_url + "/events",
                                                                     headers={"Last-Event-ID": "0123abcd-7"}) as resp:
        got = await asyncio.wait_for(_read_events(resp, sid, 1), 15)
    assert got[0][1] == "events-missed" and got[0][2] == {"last_event_id": "0123abcd-7"}


async def _raw_events(station: Station, last_event_id: bytes) -> bytes:
    """GET /events with ``Last-Event-ID`` sent as raw bytes (no client library checks them), read until the
    first event is complete; the status line and everything read."""
    reader, writer = await asyncio.open_connection("127.0.0.1", station.api_port)
    try:
        writer.write(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
                     + station.token.encode() + b"\r\nLast-Event-ID: " + last_event_id + b"\r\n\r\n")
        await writer.drain()
        got = b""
        while b"event: " not in got or b"\n\n" not in got.partition(b"event: ")[2]:
            chunk = await asyncio.wait_for(reader.read(4096), 15)
            if not chunk:
                break
            got += chunk
        return got
    finally:
        writer.close()


@pytest.mark.parametrize("odd", ["\u00b2", "\u0663", "\uff11", "+1", "9" * 5000, "1\u00b2"])
async def test_sse_an_odd_last_event_id_means_missed_events_not_a_500(station: Station, sid: str, odd: str) -> None:
    """`EPOCH-²` passes str.isdigit but not int(): it once wrote a 500 into the open 200 stream. Any id the
    daemon cannot read means "events missed", as an unknown id does."""
    auth = {"Authorization": f"Bearer {station.token}"}
    async with aiohttp.ClientSession(headers=auth) as http, http.get(station.api_url + "/events") as resp:
        reader = asyncio.create_task(_read_events(resp, sid, 1))
        await asyncio.sleep(0.2)
        _, rec = await station.ahttp("POST", "/permissions", request_body(sid, tool_call_id="odd"))
        [(real_id, _, _)] = await asyncio.wait_for(reader, 15)
    await station.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "cancel"})
    epoch = real_id.rpartition("-")[0]
    got = await _raw_events(station, f"{epoch}-{odd}".encode())
    head, _, stream = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    assert b"500" not in stream and b"Internal Server Error" not in stream, stream[:300]
    assert b"event: events-missed" in stream, stream[:300]
