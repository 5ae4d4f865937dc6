"""One Codex app-server proxy run: the door's run (:mod:`bot.door.run`) with this door's filters and proxy."""

from __future__ import annotations

from bot.codex.filters import FromClient, FromServer
from bot.codex.proxy import Proxy
from bot.door import run as door_run
from bot.door.config import ProxyConfig


async def run_proxy(cfg: ProxyConfig) -> int:
    """Run the proxy with ``cfg`` until Codex exits; its exit code (128+N for a signal). Stdout belongs to the
    relay: the caller, ``permission-bot codex-app-server``, sends logs to stderr."""
    return await door_run.run(Proxy(cfg), FromClient, FromServer, "codex")
