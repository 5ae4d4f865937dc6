"""Where the client verbs (`acp`, `permissions`) find the daemon: flags, else environment, else the default."""

from __future__ import annotations

import os

DEFAULT_URL = "http://127.0.0.1:8750"
URL_ENV = "PERMISSION_BOT_URL"
TOKEN_ENV = "PERMISSION_BOT_TOKEN"


def discover(url: str | None, token: str | None) -> tuple[str, str | None]:
    """The daemon's base URL (no trailing slash) and its API token (None when unset)."""
    u = (url or os.environ.get(URL_ENV) or DEFAULT_URL).strip().rstrip("/")
    t = token if token is not None else os.environ.get(TOKEN_ENV)
    return u, (t or None)
