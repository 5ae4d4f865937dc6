"""HTTP limits: a cap on open connections, a header-read timeout, budgets for requests in progress.

At the connection cap a new connection evicts the oldest idle one (no request in progress);
when none is idle, one whose request is not a decider's, from the caller holding the most
connections (an agent token, or the callers without a valid token); when every connection
serves a decider it gets ``503`` with ``Retry-After`` and is closed. A connection that has not
sent a whole request head within ``HEADER_TIMEOUT`` is closed, and an idle keep-alive one (or
one sending its next head) after ``KEEPALIVE_TIMEOUT``; a body must arrive whole within
``BODY_TIMEOUT`` (``408``, see :mod:`bot.api.budget`). An agent token holds at most
``PER_AGENT`` requests in progress (held hooks, long-polls, bodies being read: ``429``), all
agent tokens together ``AGENT_TOTAL`` (``503``); other callers' long-polls at most
``MAX_LONG_POLLS`` (``503``). So idle sockets, parked long-polls, held hooks or trickled bodies
cannot starve ``/healthz``, ``/metrics``, a decider, a read or another agent's submit.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

import structlog
from aiohttp import web
from aiohttp.web_protocol import RequestHandler

log = structlog.get_logger("api")

MAX_CONNECTIONS = 512
MAX_LONG_POLLS = 256
HEADER_TIMEOUT = 10.0
KEEPALIVE_TIMEOUT = 15.0
BODY_TIMEOUT = 10.0  # seconds for a whole request body
PER_AGENT = 64  # requests in progress per agent token
AGENT_TOTAL = 256  # requests in progress of all agent tokens together
RETRY_AFTER = 2  # seconds, in every 429 and 503 for load


@dataclass
class Limits:
    max_connections: int = MAX_CONNECTIONS
    max_long_polls: int = MAX_LONG_POLLS
    header_timeout: float = HEADER_TIMEOUT
    body_timeout: float = BODY_TIMEOUT
    per_agent: int = PER_AGENT
    agent_total: int = AGENT_TOTAL
    long_polls: int = 0  # held now by callers without an agent budget
    agents: Counter[str] = field(default_factory=Counter)  # requests in progress per agent token
    evicted: int = 0  # connections closed to make room
    refused: int = 0  # connections, long-polls and agent requests refused for load

    def take_agent(self, name: str) -> web.Response | None:
        """Count one request of agent token ``name``; the 429/503 to answer when over its budget."""
        if self.agents[name] >= self.per_agent:
            self.refused += 1
            why = f"token {name!r} has {self.per_agent} requests in progress, the most one agent token may hold"
            return busy(f"{why}; retry later", status=429)
        if self.agents.total() >= self.agent_total:
            self.refused += 1
            return busy(f"agent tokens hold {self.agent_total} requests in progress together; retry later")
        self.agents[name] += 1
        return None

    def give_agent(self, name: str) -> None:
        self.agents[name] -= 1
        if self.agents[name] <= 0:
            del self.agents[name]

    def take_long_poll(self) -> bool:
        if self.long_polls >= self.max_long_polls:
            self.refused += 1
            return False
        self.long_polls += 1
        return True

    def give_long_poll(self) -> None:
        self.long_polls -= 1


def busy(reason: str, status: int = 503) -> web.Response:
    """``503`` (or ``429``) ``{"error": "busy"}`` with ``Retry-After``."""
    return web.json_response(
        {"error": "busy", "reason": reason}, status=status, headers={"Retry-After": str(RETRY_AFTER)}
    )


_REFUSAL = json.dumps({"error": "busy", "reason": "too many open connections; retry later"}).encode()
_REFUSAL_HTTP = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    + f"Retry-After: {RETRY_AFTER}\r\nContent-Length: {len(_REFUSAL)}\r\nConnection: close\r\n\r\n".encode()
    + _REFUSAL
)


def _live(h: RequestHandler) -> bool:
    """Not on its way out: a connection answered with ``Connection: close`` (a flood's 429s) stays in the
    server's list until the loop gets to its ``connection_lost``; counted, it would push out new ones."""
    t = h.transport
    return t is not None and not t.is_closing() and not h._force_close


def _idle(h: RequestHandler) -> bool:
    """No request being handled: still sending its first head, or waiting between requests."""
    waiter = h._waiter
    return h._request_count == 0 or (waiter is not None and not waiter.done() and not h._messages)


def _victim(open_now: Iterable[RequestHandler], me: RequestHandler) -> RequestHandler | None:
    """The connection to close for a new one: an idle one, else a busy one not serving a decider,
    of the caller holding the most connections."""
    others = [h for h in open_now if h is not me]  # live ones only (connection_made filters with _live)
    idle = next((h for h in others if _idle(h)), None)
    if idle is not None:
        return idle
    groups: dict[str, list[RequestHandler]] = {}
    for h in others:
        if isinstance(h, _Handler) and not h.trusted:
            groups.setdefault(h.caller, []).append(h)
    return max(groups.values(), key=len)[0] if groups else None


def mark(request: web.BaseRequest, caller: str, trusted: bool) -> None:
    """Note on ``request``'s connection who it serves now: the token's name ("" for none); a
    ``trusted`` (decider) one is never closed to make room."""
    proto = request.protocol
    if isinstance(proto, _Handler):
        proto.caller, proto.trusted = caller, trusted


class _Handler(RequestHandler):
    """aiohttp's connection handler with the connection cap and the header-read timeout."""

    limits: Limits
    caller = ""  # who the request in progress (or the last one) came from
    trusted = False
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        server = cast(web.Server, self._manager)
        open_now = [h for h in server._connections if _live(h)]  # answered and closing ones are leaving
        if len(open_now) > self.limits.max_connections:
            victim = _victim(open_now, self)
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
