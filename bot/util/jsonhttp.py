"""One blocking JSON-over-HTTP helper (stdlib urllib, so commands start fast): doctor, the demo and the CLI.

``call`` answers ``(status, body)`` for any HTTP status (body: parsed JSON, else the text, else None)
and raises ``Unreachable`` only when nothing answered. ``ok`` raises ``HTTPStatusError`` unless 2xx.
Requests to a loopback address never go through a proxy from the environment.
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


class Unreachable(Exception):
    """Nothing answered (refused, unknown host, timed out); ``reason`` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class HTTPStatusError(Exception):
    """A non-2xx answer where one was required."""

    def __init__(self, url: str, status: int) -> None:
        super().__init__(f"{url}: HTTP {status}")
        self.status = status


def reason(err: BaseException) -> str:
    """A short, lower-case reason for a failure to get any answer."""
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
    return " ".join((str(err) or type(err).__name__).split())


def opener(url: str) -> urllib.request.OpenerDirector:
    """An opener that ignores proxies from the environment for loopback URLs."""
    host = urllib.parse.urlsplit(url).hostname or ""
    local = host in LOOPBACK or host.startswith("127.")
    return urllib.request.build_opener(*([urllib.request.ProxyHandler({})] if local else []))


def decode(raw: bytes) -> Any:
    text = raw.decode("utf-8", errors="replace")
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def call(
    method: str, url: str, body: Any = None, *, token: str | None = None, timeout: float = 30.0,
    links: list[str] | None = None,
) -> tuple[int, Any]:
    """Send one JSON request; ``(status, body)`` for any status; ``Unreachable`` when nothing answered.
    ``links`` gets the answer's ``Link`` header values."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Accept", "application/json")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with opener(url).open(req, timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
            if links is not None:
                links.extend(resp.headers.get_all("Link") or [])
    except urllib.error.HTTPError as err:
        status = err.code
        try:
            raw = err.read()
        except (OSError, http.client.HTTPException):
            raw = b""
    except (OSError, http.client.HTTPException, ValueError) as err:
        raise Unreachable(reason(err)) from None
    return status, decode(raw)


def ok(method: str, url: str, body: Any = None, *, token: str | None = None, timeout: float = 30.0) -> Any:
    """The body of a 2xx answer (``{}`` when empty); ``HTTPStatusError`` otherwise."""
    status, got = call(method, url, body, token=token, timeout=timeout)
    if not 200 <= status < 300:
        raise HTTPStatusError(url, status)
    return {} if got is None else got


def quote(segment: str) -> str:
    """One URL path segment, every reserved character escaped."""
    return urllib.parse.quote(segment, safe="")
