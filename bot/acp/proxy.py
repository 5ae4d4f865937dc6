"""The ACP proxy's state: the pending requests and forms, and the hooks the line filters call.

Everything it does not handle passes byte for byte, both ways (:mod:`bot.door.relay`). From the agent it takes
``session/request_permission`` (:mod:`bot.acp.request`) and ``elicitation/create`` (:mod:`bot.acp.elicit`), and
``$/cancel_request`` for one of them (withdrawn); from the client it acts on ``session/cancel`` (pending requests
cancelled in the daemon and answered before the cancel is relayed) and takes the answers to requests it forwarded
(``--fallback forward``). Which lines are parsed and noted: :mod:`bot.acp.filters`; the run: :mod:`bot.acp.run`.
"""
from __future__ import annotations

import asyncio
from typing import Any

import structlog

from bot.acp.elicit import Elicitation
from bot.acp.messages import withdrawn_id
from bot.acp.qwen import QwenQuestions, is_user_question
from bot.acp.request import Request
from bot.acp.toolcalls import ToolCallCache
from bot.door import outcomes
from bot.door.config import ProxyConfig
from bot.door.ids import FWD_PREFIX, id_key, line_of
from bot.door.proxy import DoorProxy
from bot.door.relay import in_thread
from bot.door.request import DaemonRequest

log = structlog.get_logger("bot.acp")


class Proxy(DoorProxy):
    """One ACP proxy run's state: the pending and forwarded requests, the sinks to both sides."""

    def __init__(self, cfg: ProxyConfig) -> None:
        super().__init__(cfg)
        self.cache = ToolCallCache()
        self.requests: dict[int, Request] = {}
        self.forwarded: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.elicitations: dict[int, Elicitation] = {}
        self.client_elicitation: frozenset[str] = frozenset()  # the modes the client advertised (initialize)
        self.withdrawn_fwd: set[str] = set()  # ids of copies withdrawn from the client: their replies are dropped
        # working directories: by the id of a session/new not answered yet (then by session id: cwd_by_session)
        self.cwd_by_rpc: dict[tuple[str, Any], str] = {}

    # ---- hooks called by the line filters

    def on_permission_request(self, msg: dict[str, Any]) -> None:
        """Take a permission request off the relay and start resolving it (Qwen Code's question: as a form)."""
        if is_user_question(msg.get("params")):
            self._start_form(QwenQuestions(self, msg, self.next_n()))
            return
        req = Request(self, msg, self.next_n())
        self.requests[req.n] = req
        req.log.info("permission_request_received")
        req.submission = req.body()  # now, while the cache holds what the agent said up to this line
        req.task = asyncio.create_task(req.run())
        req.task.add_done_callback(lambda _t: self.requests.pop(req.n, None))

    def on_elicitation(self, msg: dict[str, Any]) -> None:
        """Take an ``elicitation/create`` off the relay: the room asks it (:mod:`bot.acp.elicit`)."""
        self._start_form(Elicitation(self, msg, self.next_n()))

    def _start_form(self, e: Elicitation) -> None:
        self.elicitations[e.n] = e
        e.log.info("elicitation_received", questions=len(e.form.asks) if e.form else 0)
        e.task = asyncio.create_task(e.run())
        e.task.add_done_callback(lambda _t: self.elicitations.pop(e.n, None))

    async def cancel_session(self, session_id: str) -> None:
        """The client cancelled a turn: cancel the session's pending requests; return once each is answered."""
        hit = [r for r in self.requests.values() if r.session_id == session_id and r.task and not r.task.done()]
        forms = [e for e in self.elicitations.values() if e.session_id == session_id and not e.done]
        if not hit and not forms:
            return
        log.info("session_cancel_received", session_id=session_id, count=len(hit) + len(forms))
        for r in hit:
            r.cancel("client")
        for e in forms:
            e.cancel("client", "the agent's turn was cancelled")
        tasks = [t for t in [*(r.task for r in hit), *(e.task for e in forms)] if t is not None]
        await asyncio.wait(tasks, timeout=self.cfg.cancel_budget + 2.0)

    async def cancel_tied(self, params: Any) -> None:
        """``$/cancel_request`` from the client: the request-scoped forms tied to the request it cancels are
        cancelled (as ``session/cancel`` cancels a session's); return once each is answered."""
        key = id_key(withdrawn_id(params))
        forms = [e for e in self.elicitations.values() if key is not None and e.tied_to == key and not e.done]
        for e in forms:
            e.log.info("elicitation_parent_cancelled", message="the client cancelled the request it is tied to")
            e.cancel("client", "the client cancelled the request it was asked for")
        tasks = [e.task for e in forms if e.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=self.cfg.cancel_budget + 2.0)

    def on_agent_answered(self, rpc_id: Any) -> None:
        """The agent answered the client's request ``rpc_id``: a form tied to it asks about what is over, so it
        is cancelled (the agent gets ``cancel``; the room's prompts are withdrawn)."""
        key = id_key(rpc_id)
        for e in [e for e in self.elicitations.values() if key is not None and e.tied_to == key and not e.done]:
            e.log.info("elicitation_parent_answered", message="the agent answered the request it is tied to")
            e.cancel("agent", "the agent answered the request it was asked for")

    async def on_cancel_request(self, params: Any) -> bool:
        """``$/cancel_request`` from the agent: withdraw the permission request it names. True when taken."""
        key = id_key(withdrawn_id(params))
        if key is None:
            return False
        form = next((e for e in self.elicitations.values() if id_key(e.rpc_id) == key), None)
        if form is not None:
            form.log.info("elicitation_withdrawn_by_agent")
            form.cancel("agent", outcomes.WITHDRAWN)
            return True
        req = next((r for r in self.requests.values() if id_key(r.rpc_id) == key), None)
        if req is None:
            return False  # not one of ours: it goes to the client unchanged
        if isinstance(req, Request) and req.forwarded:  # the client holds it under the proxy's id: tell it so
            await self.cancel_at_client(self._fwd_id(req))
            return True
        req.log.info("permission_request_withdrawn_by_agent")
        req.cancel("agent", withdrawn=True)
        return True

    def _fwd_id(self, req: DaemonRequest) -> str:  # the id a forwarded request has at the client
        return f"{FWD_PREFIX}{self.fwd_id}:{req.n}"

    async def forward(self, req: DaemonRequest) -> None:
        """Fallback: send the request to the client under a fresh id, relay its answer back."""
        reply = await self.ask_client(req.msg, self._fwd_id(req))
        await self.send_agent({**reply, "id": req.rpc_id})

    async def cancel_at_client(self, fresh: str) -> None:
        """``$/cancel_request`` to the client for what it holds under the proxy's id ``fresh``."""
        note = {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": fresh}}
        await in_thread(self.relay_to_client, line_of(note))

    async def ask_client(self, msg: dict[str, Any], fresh: str) -> dict[str, Any]:
        """``msg`` sent to the client under the id ``fresh``; its reply (a JSON-RPC message)."""
        assert self.to_client is not None
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.forwarded[fresh] = fut
        try:
            await in_thread(self.to_client.write, line_of({**msg, "id": fresh}))
            return await fut
        finally:
            self.forwarded.pop(fresh, None)

    # ---- the end of the run (:mod:`bot.acp.run`)

    async def settle_all(self, by: str, *, answer: bool) -> None:
        """Cancel every pending request (bounded); forwarded ones are answered cancelled."""
        budget = self.cfg.shutdown_budget
        reqs = [r for r in self.requests.values() if not r.done]
        forms = [e for e in self.elicitations.values() if not e.done]
        for e in forms:
            e.cancel(by, f"the {by} went away", budget, answer=answer)
        for fwd_id, fut in list(self.forwarded.items()):
            if not fut.done():
                fut.set_result({"jsonrpc": "2.0", "id": fwd_id, "result": outcomes.cancelled()})
        if forms:
            await asyncio.wait([e.task for e in forms if e.task is not None], timeout=budget + 3.0)
        if not reqs:
            return
        log.info("pending_requests_cancelling", count=len(reqs), by=by)
        for r in reqs:
            r.cancel(by, budget, answer=answer)  # a forwarded one is the client's to answer: left alone
        tasks = [r.task for r in reqs if r.task is not None]
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=budget + 1.5)
            for t in late:
                t.cancel()

    async def finish(self) -> None:
        """After the run: stop what is left, close both sinks, end the run's session rules (bounded)."""
        for r in list(self.requests.values()):
            if r.task is not None:
                r.task.cancel()
        for e in list(self.elicitations.values()):
            if e.task is not None:
                e.task.cancel()
        await self.close_door()
