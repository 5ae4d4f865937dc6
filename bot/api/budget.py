"""Who a request counts against, and the deadline for its body (limits in :mod:`bot.api.limits`).

Every request with an agent-only token counts against that token's budget while it is in
progress (a held hook, a long-poll, a body being read, anything); beyond it the caller gets
``429`` (one token) or ``503`` (all agent tokens) with ``Retry-After``, before its body is read.
Decider tokens, callers without a token (``/healthz``, ``/metrics``, 401s) never count against
it, and a decider's connection is never closed to make room.
"""

from __future__ import annotations

import asyncio

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from bot.api.auth import DECIDER, Tokens
from bot.api.limits import Limits, mark

AGENT_SLOT: web.RequestKey[bool] = web.RequestKey("agent_slot", bool)


class BodyTimeout(Exception):
    """The request body did not arrive whole within the deadline (answered ``408``)."""


async def read_body(request: web.Request, timeout: float) -> bytes:
    """The whole body, or :class:`BodyTimeout` when it takes longer than ``timeout`` seconds."""
    try:
        async with asyncio.timeout(timeout):
            return await request.read()
    except TimeoutError:
        raise BodyTimeout(f"the request body did not arrive whole within {timeout:g} s") from None


def counted(request: web.Request) -> bool:
    """Whether ``request`` already holds a slot of an agent token's budget."""
    return bool(request.get(AGENT_SLOT))


def budget(tokens: Tokens, limits: Limits) -> Middleware:
    """The middleware that marks each request's connection and counts agent requests."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        who = tokens.identify(request.headers.get("Authorization")) if tokens.configured else None
        trusted = who is not None and DECIDER in who.roles
        mark(request, who.name if who is not None else "", trusted)
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

