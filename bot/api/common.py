"""What every route module shares: the app keys (the daemon, the tokens, the limits), the
JSON error answer, the caller check (token, then role: :func:`route`), the caller's rooms and the JSON body read.
Route modules import this, never the app (app.py imports them to register their routes).

Rooms are a boundary for reads too: every route that shows or touches requests or session rules
asks :func:`reach` which rooms its caller may see, and shows or touches nothing else (404, or absent
from a list or a stream)."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web
from aiohttp.typedefs import Handler

from bot.api.auth import DECIDER, Action, Caller, Denied, Tokens, authenticate, may
from bot.api.limits import BODY_TIMEOUT, BodyTimeout, Limits
from bot.inbox.submission import SubmissionError

if TYPE_CHECKING:
    from bot.service.daemon import Daemon


DAEMON: web.AppKey[Daemon] = web.AppKey("daemon")
TOKENS: web.AppKey[Tokens] = web.AppKey("tokens")
LIMITS: web.AppKey[Limits] = web.AppKey("limits")


def error(status: int, code: str, reason: str) -> web.Response:
    return web.json_response({"error": code, "reason": reason}, status=status)


def refuse(d: Denied) -> web.Response:
    return error(d.status, d.code, d.reason)


@dataclass(frozen=True)
class Reach:
    """The station rooms a caller may see and touch: ``rooms`` by name, or None for every room."""

    rooms: frozenset[str] | None

    def sees(self, room: str) -> bool:
        return self.rooms is None or room in self.rooms


def reach(request: web.Request, who: Caller) -> Reach:
    """The rooms ``who`` may see and touch: a decider token its ``rooms`` (default: every room; the old
    single ``api.token`` is one), an agent token only the room its requests go to (``[[rooms]] tokens``)."""
    if DECIDER in who.roles:
        return Reach(who.rooms)
    return Reach(frozenset({request.app[DAEMON].cfg.room_of_token(who.name)}))


Route = Callable[[web.Request, Caller, Reach], Awaitable[web.StreamResponse]]


def route(action: Action) -> Callable[[Route], Handler]:
    """A route's handler, given its caller (authenticated, allowed to ``action``) and the caller's :func:`reach`;
    any other caller gets the 401/403."""

    def checked(handler: Route) -> Handler:
        @functools.wraps(handler)
        async def handle(request: web.Request) -> web.StreamResponse:
            who = authenticate(request.app[TOKENS], request.headers.get("Authorization"))
            if isinstance(who, Denied):
                return refuse(who)
            denied = may(who, action)
            return refuse(denied) if denied is not None else await handler(request, who, reach(request, who))

        return handle

    return checked


async def json_body(request: web.Request, obj: bool = False) -> Any:
    """The request's JSON body (``obj``: it must be an object), or SubmissionError (BodyTimeout when it does not
    arrive whole within ``BODY_TIMEOUT``)."""
    try:
        async with asyncio.timeout(BODY_TIMEOUT):
            raw = await request.read()
    except TimeoutError:
        raise BodyTimeout(f"the request body did not arrive whole within {BODY_TIMEOUT:g} s") from None
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise SubmissionError(f"body: not valid JSON ({e})") from None
    except RecursionError:
        raise SubmissionError("body: nested too deeply") from None
    if obj and not isinstance(body, dict):
        raise SubmissionError("body: expected a JSON object")
    return body
