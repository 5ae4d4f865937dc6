"""HTTP limits: a cap on open connections, a header-read timeout, a cap on long-polls.

At the connection cap a new connection evicts the oldest idle one (no request in progress);
when none is idle it gets ``503`` with ``Retry-After`` and is closed. A connection that has
not sent a whole request head within ``HEADER_TIMEOUT`` is closed, and an idle keep-alive
one after ``KEEPALIVE_TIMEOUT``. Long-polls (``?wait=``, ``/events``) hold a slot each;
beyond ``MAX_LONG_POLLS`` they get ``503`` with ``Retry-After``. So idle sockets or parked
long-polls cannot starve ``/healthz`` or a submit.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, cast

import structlog
from aiohttp import web
from aiohttp.web_protocol import RequestHandler

log = structlog.get_logger("api")

MAX_CONNECTIONS = 512
MAX_LONG_POLLS = 256
HEADER_TIMEOUT = 10.0
KEEPALIVE_TIMEOUT = 15.0
RETRY_AFTER = 2  # seconds, in every 503 for load


@dataclass
class Limits:
    max_connections: int = MAX_CONNECTIONS
    max_long_polls: int = MAX_LONG_POLLS
    header_timeout: float = HEADER_TIMEOUT
    long_polls: int = 0  # held now
    evicted: int = 0  # idle connections closed to make room
    refused: int = 0  # connections and long-polls answered 503

    def take_long_poll(self) -> bool:
        if self.long_polls >= self.max_long_polls:
            self.refused += 1
            return False
        self.long_polls += 1
        return True

    def give_long_poll(self) -> None:
        self.long_polls -= 1


def busy(reason: str) -> web.Response:
    """``503 {"error": "busy"}`` with ``Retry-After``."""
    return web.json_response(
        {"error": "busy", "reason": reason}, status=503, headers={"Retry-After": str(RETRY_AFTER)}
    )


_REFUSAL = json.dumps({"error": "busy", "reason": "too many open connections; retry later"}).encode()
_REFUSAL_HTTP = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    + f"Retry-After: {RETRY_AFTER}\r\nContent-Length: {len(_REFUSAL)}\r\nConnection: close\r\n\r\n".encode()
    + _REFUSAL
)


def _idle(h: RequestHandler) -> bool:
    """No request being handled: still sending its first head, or waiting between requests."""
    waiter = h._waiter
    return h._request_count == 0 or (waiter is not None and not waiter.done() and not h._messages)


class _Handler(RequestHandler):
    """aiohttp's connection handler with the connection cap and the header-read timeout."""

    limits: Limits
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        server = cast(web.Server, self._manager)
        open_now = server._connections
        if len(open_now) > self.limits.max_connections:
            victim = next((h for h in open_now if h is not self and _idle(h)), None)
            if victim is None:
                self.limits.refused += 1
                cast(asyncio.Transport, transport).write(_REFUSAL_HTTP)
                self.force_close()
                return
            self.limits.evicted += 1
            victim.force_close()
        self._deadline = self._loop.call_later(self.limits.header_timeout, self._head_overdue)

    def _head_overdue(self) -> None:
        self._deadline = None
        if self._request_count == 0:
            self.force_close()

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        super().connection_lost(exc)


class _Factory:
    """The protocol factory the listening socket uses: aiohttp's server, with _Handler."""

    def __init__(self, server: web.Server, limits: Limits) -> None:
        self.server = server
        self.limits = limits

    def __call__(self) -> RequestHandler:
        s: Any = self.server
        h = _Handler(self.server, loop=s._loop, **s._kwargs)
        h.limits = self.limits
        return h


class LimitedRunner(web.AppRunner):
    """An AppRunner whose sites apply ``limits`` to every connection."""

    def __init__(self, app: web.Application, limits: Limits, **kwargs: Any) -> None:
        kwargs.setdefault("keepalive_timeout", KEEPALIVE_TIMEOUT)
        super().__init__(app, **kwargs)
        self.limits = limits

    @property
    def server(self) -> web.Server | None:
        s = self._server
        return None if s is None else cast(web.Server, _Factory(s, self.limits))
