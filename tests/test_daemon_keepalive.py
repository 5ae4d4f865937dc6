"""The proxy's path to the daemon stays open: one keep-alive connection for requests one after another."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from bot.door.daemon_client import DaemonClient
from bot.util.digest import submission_digest
from tests.test_acp_proxy import free_port


class Counting:
    """The daemon's permission routes, answering at once, counting the TCP connections they came on."""

    def __init__(self) -> None:
        self.peers: set[Any] = set()
        self.calls = 0
        self.n = 0
        self.digest: str | None = None  # the one body this test sends, so one digest

    def _seen(self, req: web.Request) -> None:
        self.calls += 1
        assert req.transport is not None
        self.peers.add(req.transport.get_extra_info("peername"))

    async def submit(self, req: web.Request) -> web.Response:
        self._seen(req)
        self.n += 1
        self.digest = submission_digest(await req.json())
        return web.json_response({"id": f"s:{self.n}", "state": "pending", "digest": self.digest}, status=201)

    async def get(self, req: web.Request) -> web.Response:
        self._seen(req)
        if req.query.get("wait"):
            await asyncio.sleep(0.01)  # a long-poll answered by a settlement
        return web.json_response({"id": req.match_info["id"], "state": "resolved", "digest": self.digest})

    async def decide(self, req: web.Request) -> web.Response:
        self._seen(req)
        return web.json_response({"id": req.match_info["id"], "state": "cancelled", "digest": self.digest})


@pytest.fixture
async def counting() -> AsyncIterator[tuple[Counting, str]]:
    c = Counting()
    app = web.Application()
    app.router.add_post("/permissions", c.submit)
    app.router.add_get("/permissions/{id}", c.get)
    app.router.add_post("/permissions/{id}", c.decide)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    yield c, f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_requests_one_after_another_share_one_connection(counting: tuple[Counting, str]) -> None:
    server, url = counting
    client = DaemonClient(url, "tok")
    try:
        for _ in range(25):  # the sequential pattern: submit, long-poll until settled, ask again
            rec = await client.submit({"sessionId": "s"})
            assert (await client.get(rec["id"], wait=30))["state"] == "resolved"  # type: ignore[index]
        await client.decide("s:1", {"decision": "cancel"})
    finally:
        await client.close()
    assert server.calls == 51
    assert len(server.peers) == 1, f"{len(server.peers)} connections for {server.calls} calls"
