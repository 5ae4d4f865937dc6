"""One Codex app-server proxy run: the door's run (:mod:`bot.door.run`) with this door's filters and proxy."""

from __future__ import annotations

import asyncio

from bot.codex.filters import FromClient, FromServer
from bot.codex.proxy import Proxy
from bot.door import run as door_run
from bot.door.config import ProxyConfig
from bot.door.relay import LineFilter


async def run_proxy(cfg: ProxyConfig) -> int:
    """Run the proxy with ``cfg`` until Codex exits; its exit code (128+N for a signal). Stdout belongs to the
    relay: the caller, ``permission-bot codex-app-server``, sends logs to stderr."""
    proxy = Proxy(cfg)

    def filters(loop: asyncio.AbstractEventLoop) -> tuple[LineFilter, LineFilter]:
        return FromClient(proxy, loop), FromServer(proxy, loop)

    return await door_run.run(proxy, filters, "codex")
