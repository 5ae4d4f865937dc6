"""One ACP proxy run: the door's run (:mod:`bot.door.run`) with the ACP line filters (:mod:`bot.acp.filters`)
and the :class:`Proxy`."""

from __future__ import annotations

import asyncio

import structlog

from bot.acp.filters import FromAgent, FromClient
from bot.acp.proxy import Proxy
from bot.door import run as door_run
from bot.door.config import ProxyConfig
from bot.door.log import configure_stderr_logging
from bot.door.relay import LineFilter


async def run(proxy: Proxy) -> int:
    """Run until the agent exits; its exit code (128+N for a signal)."""

    def filters(loop: asyncio.AbstractEventLoop) -> tuple[LineFilter, LineFilter]:
        return FromClient(proxy, loop), FromAgent(proxy, loop)

    return await door_run.run(proxy, filters)


async def run_proxy(cfg: ProxyConfig) -> int:
    """Run the proxy with ``cfg``; the agent's exit code.

    structlog's default writes to stdout, which belongs to the relay: unless logging is
    configured already, it is sent to stderr here.
    """
    if not structlog.is_configured():
        configure_stderr_logging(secrets=[cfg.token] if cfg.token else ())
    return await run(Proxy(cfg))
