"""Before logging in, the same story doctor tells: is ``matrix.homeserver`` a Matrix server (not a web
page's 404, not ``https://`` to a plain-HTTP port), and a homeserver's rate limit said as one structured
line (``matrix_rate_limited``, the wait in seconds) rather than as a failed password.

Unreachable is transient (retried, ``matrix_unreachable``); the rest is one line naming
``matrix.homeserver`` (:class:`MatrixFatal`).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import structlog

from bot.matrix.errors import MatrixFatal
from bot.matrix.retry import retry, retry_after
from bot.util.plainhttp import speaks_plain_http

log = structlog.get_logger("matrix")

TIMEOUT = 10.0


def why(r: Any) -> str:
    """``M_FORBIDDEN: Invalid password`` from a nio error response."""
    code, msg = getattr(r, "status_code", None), getattr(r, "message", None)
    return ": ".join(str(x) for x in (code, msg) if x) or type(r).__name__


def _tls_mismatch(e: BaseException) -> str | None:
    """The reason when ``e`` is a TLS handshake failure (not a connection refused or a timeout)."""
    cause: BaseException | None = e
    while cause is not None:
        if isinstance(cause, ssl.SSLError | aiohttp.ClientSSLError):
            return str(cause)
        cause = cause.__cause__ or cause.__context__
    return None


async def _versions(base: str) -> tuple[int, Any, float]:
    timeout = aiohttp.ClientTimeout(total=TIMEOUT)
    async with aiohttp.ClientSession(timeout=timeout) as s, s.get(base + "/_matrix/client/versions") as r:
        try:
            body = await r.json(content_type=None)
        except (ValueError, aiohttp.ContentTypeError):
            body = None
        wait = float(r.headers.get("Retry-After", "0") or 0) if r.headers.get("Retry-After", "").isdigit() else 0.0
        return r.status, body, wait


async def homeserver(url: str) -> None:
    """Return when ``url`` answers as a Matrix homeserver; MatrixFatal (one line) when it never can."""
    base = url.rstrip("/")

    async def once() -> tuple[int, Any, float]:
        try:
            return await _versions(base)
        except (OSError, TimeoutError, aiohttp.ClientError) as e:
            tls = _tls_mismatch(e)
            if tls is None and not await asyncio.to_thread(speaks_plain_http, base):
                raise
            if tls is None:
                tls = "the port answers plain HTTP"
            hint = ("use http:// for a plain-HTTP port, or the server's TLS port" if base.startswith("https://")
                    else "check the server's certificate")
            raise MatrixFatal(f"matrix.homeserver: the TLS handshake with {base} failed ({tls}); {hint}") from None

    while True:
        hint = f"check matrix.homeserver ({base}) and that the server is up; retrying until it answers"
        status, body, wait = await retry("homeserver", once, hint=hint)
        if status == 429:
            await rate_limited("homeserver", wait or 5.0)
            continue
        versions = body.get("versions") if isinstance(body, dict) else None
        if status == 200 and isinstance(versions, list) and versions:
            return
        raise MatrixFatal(f"matrix.homeserver: {base}/_matrix/client/versions answered HTTP {status}, not Matrix; it "
                          "must be the client-server API base URL (e.g. https://matrix.example.org)")


async def rate_limited(during: str, seconds: float) -> None:
    """Say it in one line and wait."""
    seconds = max(1.0, round(seconds, 1))
    log.warning("matrix_rate_limited", during=during, retry_in=seconds,
                hint=f"rate-limited by the homeserver, retrying in {seconds:g} s")
    await asyncio.sleep(seconds)


async def until_allowed(during: str, call: Callable[[], Awaitable[Any]]) -> Any:
    """A nio call until it is not rate-limited (each wait one ``matrix_rate_limited`` line): the client leaves
    429s to its callers (bot/matrix/client.py)."""
    while True:
        r = await retry(during, call)
        wait = retry_after(r)
        if wait is None:
            return r
        await rate_limited(during, wait)
