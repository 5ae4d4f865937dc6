"""The Codex proxy's state: the pending approvals (:class:`Approval`) and questions, and what the line filters
call.

Everything else passes byte for byte both ways (:mod:`bot.door.relay`). A prompt is withdrawn when its turn
ends (``turn/completed``), when Codex resolves the request itself (``serverRequest/resolved``: Codex is not
answered then), or when the client interrupts the turn (``turn/interrupt``: Codex gets ``cancel`` first).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any

import structlog

from bot.codex import wire
from bot.codex.ask import UserInput
from bot.door import forms
from bot.door.config import ProxyConfig
from bot.door.ids import id_key, line_of
from bot.door.proxy import DoorProxy
from bot.door.relay import in_thread
from bot.door.request import DaemonRequest, Host

log = structlog.get_logger("bot.codex")


class Approval(DaemonRequest):
    """One approval (``item/commandExecution/requestApproval``, ``item/fileChange/requestApproval``): the door's
    request with the params :func:`bot.codex.wire.approval_body` wrote, submitted, polled, cancelled, and its
    decision sent to Codex once, in Codex's words (:func:`bot.codex.wire.decision_reply`)."""

    def __init__(self, proxy: Host, msg: dict[str, Any], n: int, body: dict[str, Any]) -> None:
        super().__init__(proxy, {**msg, "params": body}, n)
        self.method: str = msg["method"]
        self.codex_params: dict[str, Any] = msg["params"]
        self.turn_id = self.codex_params.get("turnId")
        self.session_id = str(body["sessionId"])
        self.tool_call_id = str(body["toolCall"]["toolCallId"])
        self.log = log.bind(rpc_id=self.rpc_id, session_id=self.session_id, item_id=self.tool_call_id)
        self.submission = self.body()

    def withdraw(self, by: str, feedback: str, budget: float | None = None, *, answer: bool = True) -> None:
        """Cancel it in the daemon (its prompt says why); Codex is answered only when ``answer``."""
        self.cancel(by, budget, answer=answer)
        if not self.done:
            self.cancel_feedback = feedback

    async def run(self) -> None:
        try:
            result = await self._resolve()
        except Exception:
            self.log.exception("approval_failed", message="answering cancel")
            result = {"outcome": {"outcome": "cancelled"}}
        self.done = True
        if result is None or not self.answer_agent:
            return
        reply = wire.decision_reply(self.method, self.codex_params, result)
        await self.proxy.answer(self.rpc_id, reply)
        self.log.info("approval_answered", decision=wire.decision_name(reply["decision"]))


Pending = Approval | UserInput
TAKEN_KEPT = 1024  # ids of requests taken whose resolution Codex has not announced yet


class Proxy(DoorProxy):
    """One Codex proxy run's state."""

    def __init__(self, cfg: ProxyConfig) -> None:
        super().__init__(cfg)
        self.pending: dict[int, Pending] = {}
        # the JSON-RPC ids of requests the proxy took -> their number, kept until Codex says it resolved them
        # (its serverRequest/resolved comes after the answer, and the client never saw the request)
        self.taken: OrderedDict[tuple[str, Any], int] = OrderedDict()

    def _start(self, p: Pending, msg: dict[str, Any]) -> None:
        self.pending[p.n] = p
        key = id_key(msg["id"])
        if key is not None:
            self.taken[key] = p.n
            while len(self.taken) > TAKEN_KEPT:
                self.taken.popitem(last=False)
        p.task = asyncio.create_task(p.run())
        p.task.add_done_callback(lambda _t: self.pending.pop(p.n, None))

    # ---- hooks called by the line filters

    def on_approval(self, msg: dict[str, Any], body: dict[str, Any]) -> None:
        """Take an approval off the relay and start resolving it."""
        a = Approval(self, msg, self.next_n(), body)
        a.log.info("approval_received", method=a.method)
        self._start(a, msg)

    def on_user_input(self, msg: dict[str, Any], asks: list[forms.Ask]) -> None:
        """Take a ``requestUserInput`` off the relay: the room asks its questions."""
        u = UserInput(self, msg, self.next_n(), asks, self.next_n)
        u.log.info("user_input_received", questions=len(asks))
        self._start(u, msg)

    async def on_resolved(self, request_id: Any) -> bool:
        """``serverRequest/resolved``: Codex settled a request itself; a prompt still open is withdrawn (Codex
        is not answered). True when the request was one the proxy took (the client never saw it)."""
        key = id_key(request_id)
        n = self.taken.pop(key, None) if key is not None else None
        if n is None:
            return False
        p = self.pending.get(n)
        if p is not None and not p.done:
            p.log.info("request_resolved_by_codex")
            p.withdraw("agent", "Codex no longer waits for an answer", answer=False)
        return True

    def on_turn_end(self, thread_id: Any, turn_id: Any) -> None:
        """``turn/completed``: the turn's prompts still open are withdrawn (nobody waits for them)."""
        for p in self._of_turn(thread_id, turn_id):
            p.log.info("turn_ended_prompt_withdrawn")
            p.withdraw("agent", "the agent's turn ended", answer=False)

    async def interrupt(self, thread_id: Any, turn_id: Any) -> None:
        """``turn/interrupt`` from the client: the turn's open prompts are cancelled and answered first."""
        hit = self._of_turn(thread_id, turn_id)
        if not hit:
            return
        log.info("turn_interrupt_received", thread_id=thread_id, count=len(hit))
        for p in hit:
            p.withdraw("client", "the agent's turn was interrupted")
        tasks = [p.task for p in hit if p.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=self.cfg.cancel_budget + 2.0)

    def _of_turn(self, thread_id: Any, turn_id: Any) -> list[Pending]:
        return [p for p in self.pending.values()
                if not p.done and p.session_id == thread_id and (turn_id is None or p.turn_id == turn_id)]

    async def forward(self, req: DaemonRequest) -> None:
        """Fallback (``--fallback forward``): the approval goes to the client as Codex sent it; the client's
        answer goes back to Codex unchanged."""
        assert isinstance(req, Approval)
        key = id_key(req.rpc_id)
        if key is not None:
            self.taken.pop(key, None)  # the client's reply is Codex's answer now
        msg = {"jsonrpc": "2.0", "id": req.rpc_id, "method": req.method, "params": req.codex_params}
        await in_thread(self.relay_to_client, line_of(msg))

    # ---- the end of the run (:mod:`bot.door.run`)

    async def settle_all(self, by: str, *, answer: bool) -> None:
        """Withdraw every open prompt (bounded); Codex is answered when ``answer``."""
        budget = self.cfg.shutdown_budget
        live = [p for p in self.pending.values() if not p.done]
        if not live:
            return
        log.info("pending_requests_cancelling", count=len(live), by=by)
        for p in live:
            if isinstance(p, Approval) and p.forwarded:
                continue
            p.withdraw(by, f"the {by} went away", budget, answer=answer)
        tasks = [p.task for p in live if p.task is not None]
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=budget + 3.0)
            for t in late:
                t.cancel()

    async def finish(self) -> None:
        """After the run: stop what is left, close both sinks, end the run's session rules (bounded)."""
        for p in list(self.pending.values()):
            if p.task is not None:
                p.task.cancel()
        await self.close_door()
