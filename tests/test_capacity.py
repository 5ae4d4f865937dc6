"""The agent budget's arithmetic (bot/api/limits.py) and the hook retrying a busy daemon (no Synapse)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from bot.api.limits import Limits
from bot.hooks import command
from bot.hooks.command import HookFailure, _post
from tests.test_acp_proxy import free_port


def test_an_agent_token_is_capped_alone_and_all_of_them_together() -> None:
    lim = Limits(per_agent=2, agent_total=3)
    assert lim.take_agent("a") is None and lim.take_agent("a") is None
    refused = lim.take_agent("a")
    assert refused is not None and refused.status == 429 and refused.headers["Retry-After"] == "2"
    assert "'a'" in json.loads(refused.text or "")["reason"]
    assert lim.take_agent("b") is None  # another token has its own budget
    refused = lim.take_agent("c")
    assert refused is not None and refused.status == 503  # all agents together
    lim.give_agent("a")
    assert lim.take_agent("c") is None
    for name in ("a", "b", "c"):
        lim.give_agent(name)
    assert not lim.agents


class Busy:
    """A daemon's hook route that answers 429, then 503, then the decision."""

    def __init__(self) -> None:
        self.calls = 0

    async def hook(self, request: web.Request) -> web.Response:
        self.calls += 1
        await request.read()
        if self.calls <= 2:
            status = 429 if self.calls == 1 else 503
            return web.json_response({"error": "busy", "reason": "x"}, status=status, headers={"Retry-After": "0"})
        return web.json_response({"ok": 1})


@pytest.fixture
async def busy() -> AsyncIterator[tuple[Busy, str]]:
    b = Busy()
    app = web.Application()
    app.router.add_post("/hooks/claude-code", b.hook)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    yield b, f"http://127.0.0.1:{port}/hooks/claude-code"
    await runner.cleanup()


async def test_the_hook_retries_a_busy_daemon(busy: tuple[Busy, str]) -> None:
    b, url = busy
    assert (await _post(url, "t", {}, 1.0))[0] == {"ok": 1}
    assert b.calls == 3


async def test_the_hook_gives_up_on_a_daemon_busy_for_long(
    busy: tuple[Busy, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    b, url = busy
    monkeypatch.setattr(command, "BUSY_RETRY", 0.0)
    with pytest.raises(HookFailure, match="HTTP 429"):
        await _post(url, "t", {}, 1.0)
    assert b.calls == 1
