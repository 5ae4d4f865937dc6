"""HTTP limits: a cap on open connections, a header-read timeout, budgets for requests in progress, who a
request counts against and the deadline for its body.

At the connection cap a new connection evicts the oldest idle one (no request in progress);
when none is idle, one whose request is not a decider's, from the caller holding the most
connections (an agent token, or the callers without a valid token); when every connection
serves a decider it gets ``503`` with ``Retry-After`` and is closed. A connection that has not
sent a whole request head within ``HEADER_TIMEOUT`` is closed, and an idle keep-alive one (or
one sending its next head) after ``KEEPALIVE_TIMEOUT``; a body must arrive whole within
``BODY_TIMEOUT`` (``408``: :class:`BodyTimeout`). An agent-only token holds at most ``PER_AGENT``
requests in progress (anything: held hooks, long-polls, bodies being read; beyond it ``429``, before its
body is read), all agent tokens together ``AGENT_TOTAL`` (``503``); decider tokens and callers without a
token (``/healthz``, ``/metrics``, 401s) never count against it; other callers' long-polls at most
``MAX_LONG_POLLS`` (``503``). So idle sockets, parked long-polls, held hooks or trickled bodies
cannot starve ``/healthz``, ``/metrics``, a decider, a read or another agent's submit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from aiohttp.web_protocol import RequestHandler

from bot.api.auth import DECIDER, Tokens

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
    per_agent: int = PER_AGENT
    agent_total: int = AGENT_TOTAL
    long_polls: int = 0  # held now by callers without an agent budget
    agents: Counter[str] = field(default_factory=Counter)  # requests in progress per agent token

    def take_agent(self, name: str) -> web.Response | None:
        """Count one request of agent token ``name``; the 429/503 to answer when over its budget."""
        if self.agents[name] >= self.per_agent:
            why = f"token {name!r} has {self.per_agent} requests in progress, the most one agent token may hold"
            return busy(f"{why}; retry later", status=429)
        if self.agents.total() >= self.agent_total:
            return busy(f"agent tokens hold {self.agent_total} requests in progress together; retry later")
        self.agents[name] += 1
        return None

    def give_agent(self, name: str) -> None:
        self.agents -= Counter([name])  # a token down to none is dropped

    @contextlib.contextmanager
    def long_poll(self, needed: bool) -> Iterator[None]:
        """Hold a long-poll slot meanwhile when ``needed`` (an agent's request counts against its token's budget
        instead); :class:`Busy` when none is free."""
        if not needed:
            yield
            return
        if self.long_polls >= MAX_LONG_POLLS:
            raise Busy(f"more than {MAX_LONG_POLLS} long-polls at once; retry later")
        self.long_polls += 1
        try:
            yield
        finally:
            self.long_polls -= 1


class Busy(Exception):
    """Refused for load: answered :func:`busy` with this reason."""


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


class _Handler(RequestHandler):
    """aiohttp's connection handler with the connection cap and the header-read timeout."""

    caller = ""  # who the request in progress (or the last one) came from
    trusted = False
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        server = cast(web.Server, self._manager)
        open_now = [h for h in server._connections if _live(h)]  # answered and closing ones are leaving
        if len(open_now) > MAX_CONNECTIONS:
            victim = _victim(open_now, self)
            if victim is None:
                cast(asyncio.Transport, transport).write(_REFUSAL_HTTP)
                self.force_close()
                return
            victim.force_close()
        self._deadline = self._loop.call_later(HEADER_TIMEOUT, self._head_overdue)

    def _head_overdue(self) -> None:
        self._deadline = None
        if self._request_count == 0:
            self.force_close()

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        super().connection_lost(exc)


class LimitedRunner(web.AppRunner):
    """An AppRunner whose sites apply the connection cap and the header-read timeout to every connection."""

    def __init__(self, app: web.Application, **kwargs: Any) -> None:
        kwargs.setdefault("keepalive_timeout", KEEPALIVE_TIMEOUT)
        super().__init__(app, **kwargs)

    @property
    def server(self) -> web.Server | None:
        """The protocol factory the listening socket uses: aiohttp's server, with _Handler."""
        s: Any = self._server
        if s is None:
            return None

        def handler() -> RequestHandler:
            return _Handler(s, loop=s._loop, **s._kwargs)

        return cast(web.Server, handler)


AGENT_SLOT: web.RequestKey[bool] = web.RequestKey("agent_slot", bool)


class BodyTimeout(Exception):
    """The request body did not arrive whole within the deadline (answered ``408``)."""


def counted(request: web.Request) -> bool:
    """Whether ``request`` already holds a slot of an agent token's budget."""
    return bool(request.get(AGENT_SLOT))


def budget(tokens: Tokens, limits: Limits) -> Middleware:
    """The middleware that marks each request's connection (its caller; a ``trusted``, decider, one is never
    closed to make room) and counts agent requests."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        who = tokens.identify(request.headers.get("Authorization")) if tokens.configured else None
        trusted = who is not None and DECIDER in who.roles
        if isinstance(proto := request.protocol, _Handler):  # whom its connection serves now ("": no token)
            proto.caller, proto.trusted = who.name if who is not None else "", trusted
        if who is None or trusted:
            return await handler(request)
        refused = limits.take_agent(who.name)
        if refused is not None:
            refused.force_close()  # its body is never read: do not keep the connection for it
            return refused
        request[AGENT_SLOT] = True
        try:
            return await handler(request)
        finally:
            limits.give_agent(who.name)

    return middleware
