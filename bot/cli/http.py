"""A tiny blocking JSON client for the daemon's HTTP API (stdlib only, so the CLI starts fast).

Discovery: ``--url``/``--token-file`` (or the old ``--token``), else ``PERMISSION_BOT_URL`` /
``PERMISSION_BOT_TOKEN``, else ``http://127.0.0.1:8750`` and no token.
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from bot.discovery import URL_ENV, TokenFileError
from bot.discovery import discover as discover_daemon

_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


class UsageError(Exception):
    """A bad --url or --token-file (reported with exit 2)."""


class DaemonUnreachable(Exception):
    """No HTTP answer at all from the daemon."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(
            f"cannot reach the permission-bot daemon at {url}: {reason}; "
            f"is `permission-bot run` up? set --url or {URL_ENV}"
        )
        self.url = url
        self.reason = reason


def discover(url: str | None, token: str | None, token_file: str | None = None) -> tuple[str, str | None]:
    """The daemon's base URL and API token from the flags, else the environment, else the default."""
    try:
        u, t = discover_daemon(url, token, token_file)
    except TokenFileError as e:
        raise UsageError(str(e)) from None
    parts = urllib.parse.urlsplit(u)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"--url must look like http://HOST:PORT (got {u!r})")
    return u, t


def _reason(err: BaseException) -> str:
    if isinstance(err, urllib.error.URLError) and not isinstance(err, urllib.error.HTTPError):
        err = err.reason if isinstance(err.reason, BaseException) else err
    if isinstance(err, ConnectionRefusedError):
        return "connection refused"
    if isinstance(err, TimeoutError | socket.timeout):
        return "timed out"
    if isinstance(err, socket.gaierror):
        return f"unknown host ({err.strerror})"
    if isinstance(err, OSError) and err.strerror:
        return err.strerror.lower()
    text = str(err) or type(err).__name__
    return " ".join(text.split())


class Client:
    """``call(method, path, body)`` -> ``(status, parsed JSON or text)`` for any HTTP status."""

    def __init__(self, url: str, token: str | None, timeout: float = 30.0) -> None:
        self.url = url
        self.token = token
        self.timeout = timeout
        host = urllib.parse.urlsplit(url).hostname or ""
        # a proxy from the environment must not swallow requests meant for a local daemon
        handlers: list[urllib.request.BaseHandler] = []
        if host in _LOOPBACK or host.startswith("127."):
            handlers.append(urllib.request.ProxyHandler({}))
        self._opener = urllib.request.build_opener(*handlers)

    def call(self, method: str, path: str, body: object = None, query: dict[str, str] | None = None) -> tuple[int, Any]:
        """Send one request; raise DaemonUnreachable when nothing answers."""
        target = self.url + path
        if query:
            target += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(target, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with self._opener.open(req, timeout=self.timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as err:
            status = err.code
            try:
                raw = err.read()
            except (OSError, http.client.HTTPException):
                raw = b""
        except (OSError, http.client.HTTPException, ValueError) as err:
            raise DaemonUnreachable(self.url, _reason(err)) from None
        return status, _decode(raw)


def _decode(raw: bytes) -> Any:
    text = raw.decode("utf-8", errors="replace")
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text
