"""A harness of the tests' own that keeps a permission inbox exactly as seed 002 documents it.

``GET /permissions[?session=ID]`` lists every held record, oldest first (``id``, ``sessionId``,
``toolCallId``, ``toolName``, ``text``, ``options``, ``requestedAt``, the owning session's
``adapter``/``title``, ``age``, ``rawInput``); it is read-only. ``POST /permissions/:id`` takes
``{decision: approve|deny, optionId?, scope?, feedback?}`` with the Bearer token: approve picks
allow-once (allow-always with ``scope: "always"`` when offered), deny a reject option or cancels;
``optionId`` picks exactly. Unknown or already-resolved id -> 404; an approve with no allow-flavored
option and no ``optionId`` -> 409. A wrong token -> 401. Every decision taken is kept in ``decisions``,
every POST's id in ``posted``. Beyond seed 002, ``GET /permissions/:id`` reads one record with the token
(401 without it, 404 unknown): the authenticated read the bot checks its token with.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from bot.demo.homeserver import free_port

DEFAULT_OPTIONS = [
    {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
]


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


class FakeHarness:
    """An agentproto-style daemon's permission inbox, on 127.0.0.1, restartable on the same port."""

    def __init__(self, token: str = "harness-token-3d1f", port: int | None = None) -> None:
        self.token = token
        self.port = port or free_port()
        self.held: dict[str, dict[str, Any]] = {}
        self.decisions: list[dict[str, Any]] = []
        self.refused: list[int] = []  # statuses of refused POSTs
        self.posted: list[str] = []  # the id of every POST /permissions/:id, taken or not
        self.reads = 0  # GET /permissions calls
        self.tokens_seen: set[str] = set()  # every Authorization header received
        self.token_check_status: int | None = None  # GET /permissions/:id answers this, when set
        self.after_read: Callable[[], None] | None = None  # run once, right after the next list is served
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def write_runtime(self, workspace: Path) -> None:
        """``<workspace>/.agentproto/runtime.json`` naming this daemon's url and token."""
        d = workspace / ".agentproto"
        d.mkdir(parents=True, exist_ok=True)
        (d / "runtime.json").write_text(json.dumps({"url": self.url, "token": self.token}))

    @web.middleware
    async def _seen(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if "Authorization" in request.headers:
            self.tokens_seen.add(request.headers["Authorization"].removeprefix("Bearer "))
        resp: web.StreamResponse = await handler(request)
        return resp

    async def start(self) -> None:
        app = web.Application(middlewares=[self._seen])
        app.router.add_get("/permissions", self._list)
        app.router.add_get("/permissions/{id}", self._one)
        app.router.add_post("/permissions/{id}", self._decide)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def hold(
        self,
        session_id: str = "ses_abc123",
        tool: str = "Bash",
        raw_input: Any = None,
        options: list[dict[str, Any]] | None = None,
        title: str = "fix the flaky tests",
        adapter: str = "claude-code",
    ) -> str:
        """Park one tool-permission request, as a session started with --hold-permissions does."""
        pid = f"perm_{next(self._ids)}"
        self.held[pid] = {
            "id": pid,
            "sessionId": session_id,
            "toolCallId": f"toolu_{pid}",
            "toolName": tool,
            "text": f'Allow "{tool}"?',
            "options": options or DEFAULT_OPTIONS,
            "requestedAt": _iso(time.time()),
            "adapter": adapter,
            "title": title,
            "rawInput": raw_input if raw_input is not None else {"command": "bun test"},
            "_t": time.time(),
        }
        return pid

    def record(self, pid: str) -> dict[str, Any]:
        r = {k: v for k, v in self.held[pid].items() if k != "_t"}
        r["age"] = f"{int(time.time() - self.held[pid]['_t'])}s"
        return r

    def resolve_here(self, pid: str, option_id: str = "allow_once") -> None:
        """Someone answers at the harness itself (its CLI, a watch rule)."""
        del self.held[pid]
        self.decisions.append({"id": pid, "optionId": option_id, "feedback": None, "by": "cli"})

    async def _one(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.json_response({"error": "unauthorized"}, status=401)
        pid = request.match_info["id"]
        if self.token_check_status is not None:
            return web.json_response({"error": "odd"}, status=self.token_check_status)
        if pid not in self.held:
            return web.json_response({"error": "not_found", "reason": f"{pid}: unknown"}, status=404)
        return web.json_response(self.record(pid))

    async def _list(self, request: web.Request) -> web.Response:
        self.reads += 1
        session = request.query.get("session")
        out = [self.record(p) for p, r in self.held.items() if session in (None, r["sessionId"])]
        hook, self.after_read = self.after_read, None
        if hook is not None:
            hook()  # the harness changes something between this read and the bot's next call
        return web.json_response(out)

    async def _decide(self, request: web.Request) -> web.Response:
        self.posted.append(request.match_info["id"])
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            self.refused.append(401)
            return web.json_response({"error": "unauthorized"}, status=401)
        try:
            body = await request.json()
        except ValueError:
            return web.json_response({"error": "invalid_request", "reason": "body: not JSON"}, status=400)
        if not isinstance(body, dict) or body.get("decision") not in ("approve", "deny"):
            return web.json_response({"error": "invalid_request", "reason": "decision: approve or deny"}, status=400)
        pid = request.match_info["id"]
        rec = self.held.get(pid)
        if rec is None:
            self.refused.append(404)
            reason = f"{pid}: unknown or already resolved"
            return web.json_response({"error": "not_found", "reason": reason}, status=404)
        offered = {o["optionId"]: o["kind"] for o in rec["options"]}
        chosen = body.get("optionId")
        if chosen is not None and chosen not in offered:
            self.refused.append(409)
            return web.json_response({"error": "conflict", "reason": f"optionId {chosen!r} is not offered"}, status=409)
        if chosen is None:
            want = ("allow_always", "allow_once") if body.get("scope") == "always" else ("allow_once",)
            flavour = "allow" if body["decision"] == "approve" else "reject"
            picks = [o for k in want if flavour == "allow" for o, kind in offered.items() if kind == k]
            picks += [o for o, kind in offered.items() if kind.startswith(flavour)]
            chosen = picks[0] if picks else None
            if chosen is None and flavour == "allow":
                self.refused.append(409)
                return web.json_response({"error": "conflict", "reason": "no allow-flavored option"}, status=409)
        del self.held[pid]
        self.decisions.append({"id": pid, "optionId": chosen, "feedback": body.get("feedback"), "by": "api"})
        return web.json_response({"id": pid, "decision": body["decision"], "optionId": chosen})
