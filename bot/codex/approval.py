"""One Codex approval (``item/commandExecution/requestApproval``, ``item/fileChange/requestApproval``):
the door's request (:class:`bot.door.request.DaemonRequest`) with the params :func:`bot.codex.wire.approval_body`
wrote, answered with ``{"decision": ...}`` in Codex's words (:func:`bot.codex.wire.decision_reply`)."""

from __future__ import annotations

from typing import Any

import structlog

from bot.codex import wire
from bot.door.request import DaemonRequest, Host

log = structlog.get_logger("bot.codex")


class Approval(DaemonRequest):
    """One approval: submitted, polled, cancelled, and its decision sent to Codex once."""

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
