"""An in-process fake Matrix homeserver, for fast tests of the sync loop, the room-event path and the outbox.

As maubot's ``testing/bot.py`` fakes a client, this fakes the server side: the few client-server API
calls the bot makes, served over real HTTP on loopback (aiohttp), so the bot's own ``Matrix`` façade and
nio's parsing run unchanged with only ``[matrix] homeserver`` pointing here. One global event stream
(``s<N>``: N events seen), ``/sync`` long-polls, a timeline longer than ``timeline_limit`` comes
``limited`` with a ``prev_batch`` that ``/messages`` pages back from, sync filters are stored per user and
applied (room ids, event types), a send is deduplicated by its transaction id. People act directly
(:meth:`FakeHomeserver.send_as`); faults are queued per endpoint (:meth:`FakeHomeserver.fail`).

One level up, tests/support/fake_facade.py stands in for the ``Matrix`` façade itself (the outbox's
ordering tests) and for the inbox's key/value store.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from bot.demo.homeserver import free_port
from tests.support.fake_sync import Room, sync_body, visible

API = "/_matrix/client/v3"


@dataclass
class Fault:
    status: int
    errcode: str = "M_UNKNOWN"
    error: str = "injected fault"


class FakeHomeserver:
    """Users, rooms, one event stream, filters; the endpoints the bot calls."""

    def __init__(self, server_name: str = "fake.test", timeline_limit: int = 10, send_latency: float = 0.0) -> None:
        self.server_name = server_name
        self.timeline_limit = timeline_limit
        self.send_latency = send_latency
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.passwords: dict[str, str] = {}
        self.tokens: dict[str, tuple[str, str]] = {}  # access token -> (user, device)
        self.rooms: dict[str, Room] = {}
        self.aliases: dict[str, str] = {}
        self.stream: list[dict[str, Any]] = []  # every room event, in order (each has room_id)
        self.filters: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)  # user -> filter id -> definition
        self.txns: dict[tuple[str, str], str] = {}  # (token, txn id) -> event id
        self.faults: dict[str, list[Fault]] = defaultdict(list)
        self.requests: list[tuple[str, dict[str, str]]] = []  # (endpoint, query) in the order they came
        self.redeliver: list[dict[str, Any]] = []  # events put again into the next sync's timeline
        self._ids = itertools.count(1)
        self._changed = asyncio.Condition()
        self._room_locks: dict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._runner: web.AppRunner | None = None
        self._wakers: set[asyncio.Task[None]] = set()

    # -- lifecycle -----------------------------------------------------------
    async def start(self) -> FakeHomeserver:
        app = web.Application()
        r = app.router
        r.add_get("/_matrix/client/versions", self._versions)
        r.add_post(f"{API}/login", self._login)
        r.add_get(f"{API}/account/whoami", self._whoami)
        r.add_post(f"{API}/join/{{room}}", self._join)
        r.add_post(f"{API}/rooms/{{room}}/leave", self._leave)
        r.add_get(f"{API}/sync", self._sync)
        r.add_put(f"{API}/rooms/{{room}}/send/{{type}}/{{txn}}", self._send)
        r.add_put(f"{API}/rooms/{{room}}/redact/{{event}}/{{txn}}", self._redact)
        r.add_get(f"{API}/rooms/{{room}}/messages", self._messages)
        r.add_get(f"{API}/rooms/{{room}}/state/{{type}}/{{key:.*}}", self._state)
        r.add_get(f"{API}/rooms/{{room}}/state/{{type}}", self._state)
        r.add_post(f"{API}/user/{{user}}/filter", self._upload_filter)
        r.add_get(f"{API}/directory/room/{{alias}}", self._alias)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        return self

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # -- what tests set up and do ----------------------------------------------
    def register(self, localpart: str, password: str = "pw") -> str:
        user = f"@{localpart}:{self.server_name}"
        self.passwords[user] = password
        return user

    def create_room(self, creator: str, invite: list[str] | None = None, power: dict[str, int] | None = None) -> str:
        rid = f"!room{next(self._ids)}:{self.server_name}"
        self.rooms[rid] = Room(rid)
        self._put(rid, creator, "m.room.create", {"creator": creator, "room_version": "10"}, "")
        self._put(rid, creator, "m.room.member", {"membership": "join"}, creator)
        self._put(rid, creator, "m.room.power_levels", {"users": {creator: 100, **(power or {})}}, "")
        self._put(rid, creator, "m.room.join_rules", {"join_rule": "invite"}, "")
        for user in invite or []:
            self._put(rid, creator, "m.room.member", {"membership": "invite"}, user)
        return rid

    def join(self, user: str, room_id: str) -> None:
        self._put(room_id, user, "m.room.member", {"membership": "join"}, user)

    def set_state(self, room_id: str, sender: str, etype: str, content: dict[str, Any], key: str = "") -> str:
        return self._put(room_id, sender, etype, content, key)

    def send_as(self, user: str, room_id: str, content: dict[str, Any], etype: str = "m.room.message") -> str:
        """A person sends an event (no HTTP: they act on the server directly)."""
        return self._put(room_id, user, etype, content)

    def fail(self, endpoint: str, times: int = 1, status: int = 500, errcode: str = "M_UNKNOWN") -> None:
        """The next ``times`` calls of ``endpoint`` (sync, send, redact, messages, filter, ...) fail."""
        self.faults[endpoint].extend(Fault(status, errcode) for _ in range(times))

    def forget_filters(self) -> None:
        """The server lost every stored filter (a restored database): syncs with an old id get 400."""
        self.filters.clear()

    def events(self, room_id: str, sender: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.stream if e["room_id"] == room_id and (sender is None or e["sender"] == sender)]

    def count(self, endpoint: str) -> int:
        return sum(1 for e, _q in self.requests if e == endpoint)

    def queries(self, endpoint: str) -> list[dict[str, str]]:
        return [q for e, q in self.requests if e == endpoint]

    def token(self, n: int | None = None) -> str:
        return f"s{len(self.stream) if n is None else n}"

    # -- the stream ----------------------------------------------------------------
    def _put(
        self, rid: str, sender: str, etype: str, content: dict[str, Any], state_key: str | None = None,
        **extra: Any,
    ) -> str:
        ev: dict[str, Any] = {
            "event_id": f"$e{next(self._ids)}", "room_id": rid, "sender": sender, "type": etype,
            "content": content, "origin_server_ts": int(time.time() * 1000), "unsigned": {},
            **extra,
        }
        if state_key is not None:
            ev["state_key"] = state_key
            self.rooms[rid].state[(etype, state_key)] = ev
        self.stream.append(ev)
        task = asyncio.get_running_loop().create_task(self._notify())  # wakes the long-polling syncs
        self._wakers.add(task)
        task.add_done_callback(self._wakers.discard)
        return str(ev["event_id"])

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # -- endpoints -----------------------------------------------------------------
    def _auth(self, req: web.Request) -> tuple[str, str]:
        token = req.query.get("access_token") or req.headers.get("Authorization", "").removeprefix("Bearer ")
        who = self.tokens.get(token)
        if who is None:
            raise _error(401, "M_UNKNOWN_TOKEN", "unknown token")
        return who

    def _enter(self, endpoint: str, req: web.Request) -> None:
        self.requests.append((endpoint, dict(req.query)))
        if self.faults[endpoint]:
            f = self.faults[endpoint].pop(0)
            raise _error(f.status, f.errcode, f.error)

    async def _versions(self, _req: web.Request) -> web.Response:
        return web.json_response({"versions": ["v1.11"]})

    async def _login(self, req: web.Request) -> web.Response:
        self._enter("login", req)
        body = await req.json()
        ident = body.get("identifier", {}).get("user") or body.get("user", "")
        user = ident if ident.startswith("@") else f"@{ident}:{self.server_name}"
        if self.passwords.get(user) != body.get("password"):
            raise _error(403, "M_FORBIDDEN", "bad password")
        n = next(self._ids)
        token, device = f"tok{n}", body.get("device_id") or f"DEV{n}"
        self.tokens[token] = (user, device)
        return _ok({"user_id": user, "access_token": token, "device_id": device})

    async def _whoami(self, req: web.Request) -> web.Response:
        self._enter("whoami", req)
        user, device = self._auth(req)
        return _ok({"user_id": user, "device_id": device})

    async def _join(self, req: web.Request) -> web.Response:
        self._enter("join", req)
        user, _ = self._auth(req)
        rid = self.aliases.get(req.match_info["room"], req.match_info["room"])
        room = self.rooms.get(rid)
        if room is None or room.membership(user) not in ("invite", "join"):
            raise _error(403, "M_FORBIDDEN", "not invited")
        if room.membership(user) != "join":
            self.join(user, rid)
        return _ok({"room_id": rid})

    async def _leave(self, req: web.Request) -> web.Response:
        self._enter("leave", req)
        user, _ = self._auth(req)
        rid = req.match_info["room"]
        if rid in self.rooms:
            self._put(rid, user, "m.room.member", {"membership": "leave"}, user)
        return _ok({})

    async def _alias(self, req: web.Request) -> web.Response:
        self._enter("alias", req)
        rid = self.aliases.get(req.match_info["alias"])
        if rid is None:
            raise _error(404, "M_NOT_FOUND", "no such alias")
        return _ok({"room_id": rid, "servers": [self.server_name]})

    async def _state(self, req: web.Request) -> web.Response:
        self._enter("state", req)
        self._auth(req)
        room = self.rooms.get(req.match_info["room"])
        ev = room.state.get((req.match_info["type"], req.match_info.get("key", ""))) if room else None
        if ev is None:
            raise _error(404, "M_NOT_FOUND", "no such state")
        return _ok(ev["content"])

    async def _upload_filter(self, req: web.Request) -> web.Response:
        self._enter("filter", req)
        user, _ = self._auth(req)
        if user != req.match_info["user"]:
            raise _error(403, "M_FORBIDDEN", "not your filter")
        fid = str(next(self._ids))
        self.filters[user][fid] = await req.json()
        return _ok({"filter_id": fid})

    async def _send(self, req: web.Request) -> web.Response:
        self._enter("send", req)
        return await self._persist(req, req.match_info["type"], await req.json())

    async def _redact(self, req: web.Request) -> web.Response:
        self._enter("redact", req)
        body = await req.json() if req.can_read_body else {}
        return await self._persist(req, "m.room.redaction", body, redacts=req.match_info["event"])

    async def _persist(self, req: web.Request, etype: str, content: dict[str, Any], **extra: Any) -> web.Response:
        token = req.query.get("access_token", "")
        user, _ = self._auth(req)
        rid = req.match_info["room"]
        key = (token, req.match_info["txn"])
        if key in self.txns:
            return _ok({"event_id": self.txns[key]})
        room = self.rooms.get(rid)
        if room is None or room.membership(user) != "join":
            raise _error(403, "M_FORBIDDEN", "not in the room")
        async with self._room_locks[rid]:  # one room's events are persisted one after another
            if self.send_latency:
                await asyncio.sleep(self.send_latency)
            if key not in self.txns:
                self.txns[key] = self._put(rid, user, etype, content, **extra)
        return _ok({"event_id": self.txns[key]})

    async def _messages(self, req: web.Request) -> web.Response:
        self._enter("messages", req)
        self._auth(req)
        rid = req.match_info["room"]
        start = _pos(req.query.get("from", self.token()))
        end = _pos(req.query.get("to", "s0"))
        limit = int(req.query.get("limit", "10"))
        if req.query.get("dir", "b") != "b":
            raise _error(400, "M_INVALID_PARAM", "the fake pages backwards only")
        chunk: list[dict[str, Any]] = []
        i = start
        while i > end and len(chunk) < limit:
            i -= 1
            if self.stream[i]["room_id"] == rid:
                chunk.append(self.stream[i])
        body: dict[str, Any] = {"chunk": chunk, "start": f"s{start}"}
        if i > end:
            body["end"] = f"s{i}"
        return _ok(body)

    async def _sync(self, req: web.Request) -> web.Response:
        self._enter("sync", req)
        user, _ = self._auth(req)
        flt = self._filter(user, req.query.get("filter"))
        since = req.query.get("since")
        timeout = int(req.query.get("timeout", "0")) / 1000
        if since is not None and not self.redeliver:
            async with self._changed:
                try:
                    await asyncio.wait_for(
                        self._changed.wait_for(lambda: self._news(user, _pos(since), flt)), timeout
                    )
                except TimeoutError:
                    pass
        full = req.query.get("full_state") == "true"
        return _ok(self._sync_body(user, None if since is None else _pos(since), flt, full))

    def _filter(self, user: str, given: str | None) -> dict[str, Any]:
        if given is None:
            return {}
        if given.startswith("{"):
            return dict(json.loads(given))
        if given not in self.filters[user]:
            raise _error(400, "M_INVALID_PARAM", "No such filter")
        return self.filters[user][given]

    def _news(self, user: str, since: int, flt: dict[str, Any]) -> bool:
        return any(visible(self.rooms, user, e, flt) for e in self.stream[since:]) or bool(self.redeliver)

    def _sync_body(self, user: str, since: int | None, flt: dict[str, Any], full: bool = False) -> dict[str, Any]:
        body = sync_body(self.rooms, self.stream, user, since, flt, full, self.timeline_limit, self.redeliver)
        self.redeliver = [e for e in self.redeliver if e["room_id"] not in body["rooms"]["join"]]
        return body


def _pos(token: str) -> int:
    return int(token.removeprefix("s"))


def _ok(body: dict[str, Any]) -> web.Response:
    return web.json_response(body)


def _error(status: int, errcode: str, error: str) -> web.HTTPException:
    """A Matrix error body with ``status`` (raised from a handler)."""
    exc = web.HTTPException(text=json.dumps({"errcode": errcode, "error": error}), content_type="application/json")
    exc.set_status(status)
    return exc
