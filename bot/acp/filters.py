"""The proxy's line filters: which relayed lines it parses, and what it takes or notes from them.

They run in the relay threads. The cheap byte test (:func:`may_matter`) only lets a line pass
unparsed when it *certainly* holds none of the methods the proxy handles: a line with a
backslash anywhere (a JSON escape may spell any name, ``"request_permissio\\u006e"``) or with
one of the plain words is parsed. Without a backslash, JSON text spells every key and string
byte for byte, so the word test is exact. Everything not taken is relayed unchanged.
The filters judge the JSON-RPC envelope; the ACP params are read in :mod:`bot.acp.messages`.

What they find goes to the event loop in arrival order. ``session/cancel`` and
``$/cancel_request`` wait (bounded) for the loop's answer before the relay moves on, so the
agent sees the outcome of a raced request before the cancel, and later lines stay behind it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import structlog
from acp.schema import CancelNotification, CloseSessionRequest

from bot.acp.messages import session_of
from bot.door.ids import FWD_PREFIX, id_key, line_of
from bot.door.linefilter import ERROR_WORD, RESULT_WORD, ask_loop, is_request, may_matter, parse

if TYPE_CHECKING:
    from bot.acp.proxy import Proxy

log = structlog.get_logger("bot.acp")

_FWD_MARK = FWD_PREFIX.encode()
_AGENT_WORDS = (b"request_permission", b"tool_call", b"cancel_request", b"elicitation/create")
_CLIENT_WORDS = (b"cancel", b'"cwd"', b"session/close", b"initialize")
_SESSION_WORD = b"sessionId"


def loads(line: bytes | bytearray) -> dict[str, Any] | None:
    """The line as a JSON object, or None (not JSON, or not an object)."""
    msg = parse(line)
    return msg if isinstance(msg, dict) else None


def is_permission_request(msg: Any) -> bool:
    """A ``session/request_permission`` request (id, params object, no result or error)."""
    return isinstance(msg, dict) and msg.get("method") == "session/request_permission" and is_request(msg)


class FromAgent:
    """Agent -> client: takes permission requests and their withdrawals, notes tool calls and sessions."""

    def __init__(self, proxy: Proxy, loop: asyncio.AbstractEventLoop) -> None:
        self._proxy = proxy
        self._loop = loop
        # The client requests that forms seen here are tied to (this relay thread's own: the proxy registers a
        # form on the loop later, so an answer read right after its form would find no form there yet).
        self._tied: set[Any] = set()

    def wants(self, data: bytes | bytearray) -> bool:
        if self._proxy.cwd_by_rpc and _SESSION_WORD in data:
            return True
        forms = self._tied or self._proxy.elicitations  # a dict read: safe here
        if forms and (RESULT_WORD in data or ERROR_WORD in data):
            return True  # the agent answering a request a form may be tied to
        return may_matter(data, _AGENT_WORDS)

    def inspect(self, line: bytes | bytearray) -> bool:
        msg = parse(line)
        if isinstance(msg, list):
            return self._batch(msg)
        if not isinstance(msg, dict):
            return True
        proxy, method = self._proxy, msg.get("method")
        if is_permission_request(msg):
            self._loop.call_soon_threadsafe(proxy.on_permission_request, msg)
            return False
        if method == "elicitation/create" and is_request(msg):
            if "sessionId" not in msg["params"] and (tied := id_key(msg["params"].get("requestId"))) is not None:
                self._tied.add(tied)
            self._loop.call_soon_threadsafe(proxy.on_elicitation, msg)
            return False
        if method == "$/cancel_request" and "id" not in msg:
            return not ask_loop(self._loop, proxy.on_cancel_request(msg.get("params")), 5.0, "$/cancel_request")
        if method is None and ("result" in msg or "error" in msg) and (self._tied or proxy.elicitations):
            self._tied.discard(id_key(msg.get("id")))
            self._loop.call_soon_threadsafe(proxy.on_agent_answered, msg.get("id"))  # after on_elicitation: FIFO
        if method == "session/update" and "id" not in msg:
            self._loop.call_soon_threadsafe(proxy.cache.observe, msg.get("params"), len(line))
        elif method is None and proxy.cwd_by_rpc:
            key = id_key(msg.get("id"))
            res = msg.get("result")
            cwd = proxy.cwd_by_rpc.pop(key, None) if key is not None else None
            sid = res.get("sessionId") if isinstance(res, dict) else None
            if cwd is not None and isinstance(sid, str):
                proxy.cwd_by_session[sid] = cwd  # before any request of that session is handed over
                self._loop.call_soon_threadsafe(proxy.on_session, sid)  # claimed before the agent can ask
        return True

    def _batch(self, batch: list[Any]) -> bool:
        """A JSON-RPC batch (ACP has none; a hostile agent may try): its permission requests are taken
        one by one, the rest relayed as a batch of its own. True when nothing in it was ours."""
        ours = [m for m in batch if is_permission_request(m)]
        if not ours:
            return True
        log.warning("batch_permission_requests_taken", count=len(ours))
        for m in ours:
            self._loop.call_soon_threadsafe(self._proxy.on_permission_request, m)
        rest = [m for m in batch if not is_permission_request(m)]
        if rest:
            self._proxy.relay_to_client(line_of(rest))
        return False


class FromClient:
    """Client -> agent: acts on ``session/cancel`` (and ``$/cancel_request``, for the forms tied to a request),
    notes working directories, takes forwarded answers."""

    def __init__(self, proxy: Proxy, loop: asyncio.AbstractEventLoop) -> None:
        self._proxy = proxy
        self._loop = loop

    def wants(self, data: bytes | bytearray) -> bool:
        ours = bool(self._proxy.forwarded or self._proxy.withdrawn_fwd)
        return may_matter(data, _CLIENT_WORDS) or (ours and _FWD_MARK in data)

    def inspect(self, line: bytes | bytearray) -> bool:
        msg = loads(line)
        if msg is None:
            return True
        proxy, method = self._proxy, msg.get("method")
        params = msg.get("params")
        if method == "session/cancel" and "id" not in msg:
            if (sid := session_of(CancelNotification, params)) is not None:
                ask_loop(self._loop, proxy.cancel_session(sid), proxy.cfg.cancel_budget + 3.0, "session/cancel")
            return True  # relayed after the raced requests were answered
        if method == "$/cancel_request" and "id" not in msg:
            if proxy.elicitations:  # a dict read: safe from this thread
                ask_loop(self._loop, proxy.cancel_tied(params), proxy.cfg.cancel_budget + 3.0, "$/cancel_request")
            return True  # relayed after the forms tied to that request were answered
        if method == "initialize" and is_request(msg):
            return self._initialize(msg)
        if method == "session/close" and (sid := session_of(CloseSessionRequest, params)) is not None:
            self._loop.call_soon_threadsafe(proxy.on_session_close, sid)
            return True  # relayed as it is; the session's rules end beside it
        if isinstance(method, str) and isinstance(params, dict) and isinstance(params.get("cwd"), str):
            self._note_cwd(msg, params)
            return True
        if method is None and isinstance(msg.get("id"), str):
            fut2 = proxy.forwarded.get(msg["id"])  # a dict read: safe from this thread
            if fut2 is not None:
                self._loop.call_soon_threadsafe(_set_result, fut2, msg)
                return False
            if msg["id"] in proxy.withdrawn_fwd:  # the late reply to a copy withdrawn from the client
                proxy.withdrawn_fwd.discard(msg["id"])
                return False
        return True

    def _initialize(self, msg: dict[str, Any]) -> bool:
        """``initialize``: note the elicitation modes the client supports, and tell the agent it may use both
        (the room answers them: :mod:`bot.acp.elicit`). The line goes on rewritten, in its place."""
        proxy = self._proxy
        caps = msg["params"].get("clientCapabilities")
        caps = dict(caps) if isinstance(caps, dict) else {}
        had = caps.get("elicitation")
        had = dict(had) if isinstance(had, dict) else {}
        proxy.client_elicitation = frozenset(m for m in ("form", "url") if isinstance(had.get(m), dict))
        caps["elicitation"] = {**had, **{m: had[m] if m in proxy.client_elicitation else {} for m in ("form", "url")}}
        out = {**msg, "params": {**msg["params"], "clientCapabilities": caps}}
        log.info("elicitation_advertised_to_agent", client_elicitation=sorted(proxy.client_elicitation))
        if proxy.to_agent is None:
            return True
        proxy.to_agent.write(line_of(out))
        return False

    def _note_cwd(self, msg: dict[str, Any], params: dict[str, Any]) -> None:
        """``session/new`` (cwd now, session id in the agent's answer) or ``session/load`` and kin."""
        cwd = params["cwd"]
        sid = params.get("sessionId")
        if isinstance(sid, str):
            self._proxy.cwd_by_session[sid] = cwd
            self._loop.call_soon_threadsafe(self._proxy.on_session, sid)  # a session loaded: ours to claim
        elif (key := id_key(msg.get("id"))) is not None:
            self._proxy.cwd_by_rpc[key] = cwd


def _set_result(fut: asyncio.Future[Any], value: Any) -> None:
    if not fut.done():
        fut.set_result(value)
