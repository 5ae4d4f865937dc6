"""One Codex app-server proxy run: the door's run (:mod:`bot.door.run`) with this door's filters and proxy."""

from __future__ import annotations

import asyncio

import structlog

from bot.codex.filters import FromClient, FromServer
from bot.codex.proxy import Proxy
from bot.door import run as door_run
from bot.door.config import ProxyConfig
from bot.door.log import configure_stderr_logging
from bot.door.relay import LineFilter


async def run(proxy: Proxy) -> int:
    """Run until Codex exits; its exit code (128+N for a signal)."""

    def filters(loop: asyncio.AbstractEventLoop) -> tuple[LineFilter, LineFilter]:
        return FromClient(proxy, loop), FromServer(proxy, loop)

    return await door_run.run(proxy, filters, "codex")


async def run_proxy(cfg: ProxyConfig) -> int:
    """Run the proxy with ``cfg``; Codex's exit code (stdout belongs to the relay: logs go to stderr)."""
    if not structlog.is_configured():
        configure_stderr_logging(secrets=[cfg.token] if cfg.token else ())
    return await run(Proxy(cfg))
