"""``POST /hooks/claude-code`` and ``/hooks/codex``: a hook input in, held until settled, the hook's JSON out.

Claude Code's ``type: "http"`` hooks post here directly; `permission-bot hook` posts here too. The
reply is 200 with the decision (its ``Permission-Bot-Digest`` header names the digest of the record it is
for, which `permission-bot hook` checks), or ``{}`` for none (cancelled, or another door asks); a bad input
is a 4xx, which the CLI also takes as no decision. When the caller hangs up first, the request is
withdrawn (see :mod:`bot.api.hook_hold`); so are those whose daemon went away, when no hook can still
be waiting (:mod:`bot.service.hook_leases`).
"""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler

from bot.api.common import DAEMON, caller, error, json_body
from bot.api.hook_hold import hold
from bot.hooks.models import CLIS, Cli, HookInputError
from bot.util.digest import HEADER


def _gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


def _route(cli: Cli) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        who = caller(request, "submit")  # an agent token, as for POST /permissions
        if isinstance(who, web.Response):
            return who
        data = await json_body(request)
        try:
            out, digest = await hold(request.app[DAEMON], cli, data, lambda: _gone(request), submitted_by=who.name)
        except HookInputError as e:
            return error(422, "invalid_hook_input", str(e))
        return web.json_response(out or {}, headers={HEADER: digest} if out and digest else None)

    return handle


def add_hook_routes(app: web.Application) -> None:
    """Register the hook routes on ``app``."""
    for cli in CLIS:
        app.router.add_post(f"/hooks/{cli}", _route(cli))

    async def orphans(app: web.Application) -> None:  # before the first hook: bot.service.hook_leases
        await app[DAEMON].leases.start()

    app.on_startup.append(orphans)
