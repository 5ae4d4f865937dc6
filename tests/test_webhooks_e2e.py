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
    failures = {"left": 2}

    async def hook(request: web.Request) -> web.Response:
        if failures["left"] > 0:
            failures["left"] -= 1
            return web.Response(status=503)
        got.append((request.headers.get("X-Permission-Bot-Event", ""), await request.read(), dict(request.headers)))
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
        for _ in range(100):
            if len(got) >= 2:
                break
            await asyncio.sleep(0.1)
        names = [g[0] for g in got]
        assert names == ["permission-request", "permission-resolved"], names
        for _name, body, headers in got:
            want = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
            assert headers["X-Permission-Bot-Signature"] == want
            doc: dict[str, Any] = json.loads(body)
            assert doc["record"]["id"] == rec["id"]
        assert json.loads(got[1][1])["record"]["outcome"]["option_id"] == "allow_once"
        assert SECRET not in station.log_path.read_text(errors="replace")
    finally:
        station.extra_config = ""
        station.write_config()
        await station.restart_daemon()
        await runner.cleanup()
