"""One ACP proxy run: the door's run (:mod:`bot.door.run`) with the ACP line filters (:mod:`bot.acp.filters`)
and the :class:`Proxy`."""

from __future__ import annotations

from bot.acp.filters import FromAgent, FromClient
from bot.acp.proxy import Proxy
from bot.door import run as door_run
from bot.door.config import ProxyConfig


async def run_proxy(cfg: ProxyConfig) -> int:
    """Run the proxy with ``cfg`` until the agent exits; its exit code (128+N for a signal). Logging goes to
    stderr (the caller, ``permission-bot acp``, sets it up: stdout belongs to the relay)."""
    return await door_run.run(Proxy(cfg), FromClient, FromAgent)
