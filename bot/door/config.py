"""What ``permission-bot acp`` was asked to do (:class:`ProxyConfig`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bot.util.discovery import DEFAULT_URL


@dataclass
class ProxyConfig:
    """What ``permission-bot acp`` was asked to do."""

    command: list[str]
    url: str = DEFAULT_URL
    token: str | None = None
    label: str | None = None
    connect_timeout: float = 30.0
    fallback: Literal["forward", "reject"] = "reject"
    poll_wait: float = 30.0
    cancel_budget: float = 3.0  # how long one cancel may keep trying the daemon
    shutdown_budget: float = 1.5  # the same when the client or the agent goes away
    stdin_fd: int = 0
    stdout_fd: int = 1
