"""What every route module shares: the app keys (the daemon, the tokens, the limits), the
JSON error answer, the caller check (token, then role), the caller's rooms and the JSON body read.
Route modules import this, never the app (app.py imports them to register their routes).

Rooms are a boundary for reads too: every route that shows or touches requests or session rules
asks :func:`reach` which rooms its caller may see, and shows or touches nothing else (404, or absent
from a list or a stream)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from bot.api.auth import DECIDER, Action, Caller, Denied, Tokens, authenticate, may
from bot.api.budget import read_body
from bot.api.limits import Limits
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


def caller(request: web.Request, action: Action) -> Caller | web.Response:
    """The authenticated caller allowed to ``action``, or the 401/403 to answer."""
    who = authenticate(request.app[TOKENS], request.headers.get("Authorization"))
    if isinstance(who, Denied):
        return refuse(who)
    denied = may(who, action)
    return who if denied is None else refuse(denied)


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
    return Reach(frozenset({request.app[DAEMON].rooms.room_of_token(who.name)}))


def scoped(request: web.Request, action: Action) -> tuple[Caller, Reach] | web.Response:
    """:func:`caller`, and the caller's :func:`reach`."""
    who = caller(request, action)
    if isinstance(who, web.Response):
        return who
    return who, reach(request, who)


async def json_body(request: web.Request) -> Any:
    raw = await read_body(request, request.app[LIMITS].body_timeout)
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise SubmissionError(f"body: not valid JSON ({e})") from None
    except RecursionError:
        raise SubmissionError("body: nested too deeply") from None
