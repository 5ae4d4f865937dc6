"""The CLI's client for the daemon's HTTP API: a thin layer over :mod:`bot.util.jsonhttp` that names the daemon.

Discovery: ``--url``/``--token-file`` (or the old ``--token``), else ``PERMISSION_BOT_URL`` /
``PERMISSION_BOT_TOKEN``, else ``http://127.0.0.1:8750`` and no token.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from bot.util import jsonhttp
from bot.util.discovery import URL_ENV, TokenFileError, is_http_url
from bot.util.discovery import discover as discover_daemon


class UsageError(Exception):
    """A bad --url or --token-file (reported with exit 2)."""


class DaemonUnreachable(Exception):
    """No HTTP answer at all from the daemon."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(
            f"cannot reach the permission-bot daemon at {url}: {reason}; "
            f"is `permission-bot run` up? set --url or {URL_ENV}"
        )
        self.reason = reason


def discover(url: str | None, token: str | None, token_file: str | None = None) -> tuple[str, str | None]:
    """The daemon's base URL and API token from the flags, else the environment, else the default."""
    try:
        u, t = discover_daemon(url, token, token_file)
    except TokenFileError as e:
        raise UsageError(str(e)) from None
    if not is_http_url(u):
        raise UsageError(f"--url must look like http://HOST:PORT (got {u!r})")
    return u, t


class Client:
    """``call(method, path, body)`` -> ``(status, parsed JSON or text)`` for any HTTP status."""

    def __init__(self, url: str, token: str | None, timeout: float = 30.0) -> None:
        self.url = url
        self.token = token
        self.timeout = timeout
        self.next_page: str | None = None  # the last answer's ``Link: <...>; rel="next"`` (a path and query)

    def call(self, method: str, path: str, body: object = None, query: dict[str, str] | None = None) -> tuple[int, Any]:
        """Send one request; raise DaemonUnreachable when nothing answers."""
        target = self.url + path
        if query:
            target += "?" + urllib.parse.urlencode(query)
        try:
            links: list[str] = []
            status, out = jsonhttp.call(method, target, body, token=self.token, timeout=self.timeout, links=links)
        except jsonhttp.Unreachable as e:
            raise DaemonUnreachable(self.url, e.reason) from None
        self.next_page = next_link(links)
        return status, out


def next_link(values: list[str]) -> str | None:
    """The path and query of the ``rel="next"`` target in ``Link`` header values, if any."""
    for value in values:
        for part in value.split(","):
            target, _, params = part.partition(";")
            if 'rel="next"' in params.replace(" ", "") or "rel=next" in params.replace(" ", ""):
                u = urllib.parse.urlsplit(target.strip().strip("<>"))
                return u.path + ("?" + u.query if u.query else "")
    return None
