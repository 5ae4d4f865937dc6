"""The ACP stdio proxy (``permission-bot acp``): relays an agent's stdio and takes its
permission requests to the daemon's HTTP API."""

from bot.acp.log import configure_stderr_logging
from bot.acp.proxy import ProxyConfig
from bot.acp.run import run_proxy

__all__ = ["ProxyConfig", "configure_stderr_logging", "run_proxy"]
