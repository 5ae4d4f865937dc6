"""The Codex proxy's line filters: which relayed lines it parses, and what it takes or notes from them.

They run in the relay threads. As in every door, a line is parsed only when it may spell one of the words
below (or holds a backslash: a JSON escape may spell any name); everything not taken is relayed unchanged.

From Codex: the approvals and ``requestUserInput`` are taken (unless the room cannot ask them: then they go to
the client as they are); ``serverRequest/resolved`` for a request the proxy took is acted on and left out (the
client never saw that request); ``turn/completed`` withdraws the turn's open prompts; ``thread/started`` claims
the thread and notes its cwd; a file-change item (``item/started``) is kept for its approval.
From the client: ``turn/interrupt`` answers the turn's open prompts first (cancel), then goes on; a reply to a
request the proxy took (the client never saw it) is left out.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import structlog

from bot.codex import wire
from bot.door.ids import id_key
from bot.door.linefilter import ERROR_WORD, RESULT_WORD, ask_loop, is_request, may_matter, parse

if TYPE_CHECKING:
    from bot.codex.proxy import Proxy

log = structlog.get_logger("bot.codex")

_SERVER_WORDS = (b"requestApproval", b"requestUserInput", b"serverRequest/resolved", b"turn/completed",
                 b"thread/started", b"fileChange")
_CLIENT_WORDS = (b"turn/interrupt",)
ITEMS_KEPT = 256  # file-change items remembered for their approvals


class FromServer:
    """Codex -> client: takes approvals and questions, acts on their resolution and the end of turns."""

    def __init__(self, proxy: Proxy, loop: asyncio.AbstractEventLoop) -> None:
        self._proxy = proxy
        self._loop = loop
        self._items: OrderedDict[str, dict[str, Any]] = OrderedDict()  # this thread's own

    def wants(self, data: bytes | bytearray) -> bool:
        return may_matter(data, _SERVER_WORDS)

    def inspect(self, line: bytes | bytearray) -> bool:
        msg = parse(line)
        if not isinstance(msg, dict):
            return True
        proxy, method, params = self._proxy, msg.get("method"), msg.get("params")
        if not isinstance(params, dict):
            return True
        if method in wire.APPROVALS and is_request(msg):
            return self._approval(msg, params)
        if method == wire.USER_INPUT and is_request(msg):
            try:
                asks = wire.asks_of(params)
            except wire.NotAskable as e:
                log.warning("user_input_relayed_to_client", reason=str(e))
                return True
            self._loop.call_soon_threadsafe(proxy.on_user_input, msg, asks)
            return False
        if "id" in msg:
            return True
        if method == "serverRequest/resolved":
            return not ask_loop(self._loop, proxy.on_resolved(params.get("requestId")), 5.0, method)
        if method == "turn/completed":
            turn = params.get("turn")
            turn_id = turn.get("id") if isinstance(turn, dict) else None
            self._loop.call_soon_threadsafe(proxy.on_turn_end, params.get("threadId"), turn_id)
        elif method == "thread/started":
            self._thread(params.get("thread"))
        elif method == "item/started":
            item = params.get("item")
            if isinstance(item, dict) and item.get("type") == "fileChange" and isinstance(item.get("id"), str):
                self._items[item["id"]] = item
                while len(self._items) > ITEMS_KEPT:
                    self._items.popitem(last=False)
        return True

    def _approval(self, msg: dict[str, Any], params: dict[str, Any]) -> bool:
        item_id = params.get("itemId")
        item = self._items.pop(item_id, None) if isinstance(item_id, str) else None
        try:
            body = wire.approval_body(msg["method"], params, item)
        except wire.NotAskable as e:
            log.warning("approval_relayed_to_client", reason=str(e))
            return True
        self._loop.call_soon_threadsafe(self._proxy.on_approval, msg, body)
        return False

    def _thread(self, thread: Any) -> None:
        """A thread started (or resumed): note its cwd and claim it before Codex can ask anything in it."""
        if not isinstance(thread, dict) or not isinstance(thread.get("id"), str):
            return
        cwd = thread.get("cwd")
        envs = thread.get("environments")
        if not isinstance(cwd, str) and isinstance(envs, list) and envs and isinstance(envs[0], dict):
            cwd = envs[0].get("cwd")
        if isinstance(cwd, str):
            self._proxy.cwd_by_session[thread["id"]] = cwd
        self._loop.call_soon_threadsafe(self._proxy.on_session, thread["id"])


class FromClient:
    """Client -> Codex: ``turn/interrupt`` answers the turn's open prompts first; replies to requests the client
    never saw are left out."""

    def __init__(self, proxy: Proxy, loop: asyncio.AbstractEventLoop) -> None:
        self._proxy = proxy
        self._loop = loop

    def wants(self, data: bytes | bytearray) -> bool:
        if self._proxy.taken and (RESULT_WORD in data or ERROR_WORD in data):  # a dict read: safe here
            return True
        return may_matter(data, _CLIENT_WORDS)

    def inspect(self, line: bytes | bytearray) -> bool:
        msg = parse(line)
        if not isinstance(msg, dict):
            return True
        proxy, method, params = self._proxy, msg.get("method"), msg.get("params")
        if method == "turn/interrupt" and isinstance(params, dict):
            ask_loop(self._loop, proxy.interrupt(params.get("threadId"), params.get("turnId")),
                     proxy.cfg.cancel_budget + 3.0, method)
            return True  # relayed after the turn's open prompts were answered
        if method is None and ("result" in msg or "error" in msg) and id_key(msg.get("id")) in proxy.taken:
            log.warning("client_reply_dropped", message="a reply to a request the proxy answers itself")
            return False
        return True
