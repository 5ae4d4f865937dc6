"""Outgoing webhooks: signed with HMAC-SHA256 of the body, retried with back-off."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from typing import Any

import pytest
from aiohttp import web

from bot.demo.homeserver import free_port
from tests.support.station import Station, request_body

pytestmark = pytest.mark.e2e
SECRET = "hook-secret-4e1f"


async def test_webhooks_are_signed_and_retried(station: Station, sid: str) -> None:
    got: list[tuple[str, bytes, dict[str, str]]] = []
    attempts: dict[tuple[str, str], int] = {}  # (event, record id) -> deliveries tried

    async def hook(request: web.Request) -> web.Response:
        # the session's station may still settle another test's request: each delivery fails twice first
        body = await request.read()
        name = request.headers.get("X-Permission-Bot-Event", "")
        key = (name, json.loads(body)["record"]["id"])
        attempts[key] = attempts.get(key, 0) + 1
        if attempts[key] <= 2:
            return web.Response(status=503)
        got.append((name, body, dict(request.headers)))
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    station.extra_config = f'\n[[webhooks]]\nurl = "http://127.0.0.1:{port}/hook"\nsecret = "{SECRET}"\n'
    station.write_config()
    await station.restart_daemon()
    try:
        _, rec = await station.ahttp("POST", "/permissions", request_body(sid))
        await station.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "approve"})

        def mine() -> list[tuple[str, bytes, dict[str, str]]]:
            return [g for g in got if json.loads(g[1])["record"]["id"] == rec["id"]]

        for _ in range(300):
            if len(mine()) >= 2:
                break
            await asyncio.sleep(0.1)
        names = [g[0] for g in mine()]
        assert names == ["permission-request", "permission-resolved"], names
        assert attempts[("permission-request", rec["id"])] == attempts[("permission-resolved", rec["id"])] == 3
        for _name, body, headers in mine():
            want = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
            assert headers["X-Permission-Bot-Signature"] == want
            doc: dict[str, Any] = json.loads(body)
            assert doc["record"]["id"] == rec["id"]
        assert json.loads(mine()[1][1])["record"]["outcome"]["option_id"] == "allow_once"
        assert SECRET not in station.log_path.read_text(errors="replace")
    finally:
        station.extra_config = ""
        station.write_config()
        await station.restart_daemon()
        await runner.cleanup()
