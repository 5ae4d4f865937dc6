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
    async with aiohttp.ClientSession() as http, http.get(station.api_url + "/events") as resp:
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
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/permissions/{rec['id']}", timeout=5) as r:
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
