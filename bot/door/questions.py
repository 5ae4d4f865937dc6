"""One question of a form as a daemon request (:class:`QuestionRequest`), and what ends a set of questions asked
together (:class:`QuestionSet`: an ACP form, a Codex ``requestUserInput``).

A :class:`bot.door.request.DaemonRequest` whose params the proxy wrote (:func:`bot.door.forms.question_body`), not
the agent: submitted, long-polled, cancelled and re-submitted exactly as a permission request is, but its result is
kept for the form (ACP's elicitation, Codex's ``requestUserInput``) instead of being sent to the agent, and a refusal
or an unreachable daemon is a failure of the room, not a fallback answer.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from bot.door.daemon_client import DaemonError
from bot.door.request import DaemonRequest, Host

log = structlog.get_logger("bot.acp")


class QuestionRequest(DaemonRequest):
    """One question in the room: its record, once settled, is :meth:`record`."""

    def __init__(self, proxy: Host, body: dict[str, Any], n: int) -> None:
        super().__init__(proxy, {"id": f"question:{n}", "params": body}, n)
        self.session_id = str(body["sessionId"])
        self.tool_call_id = str(body["toolCall"]["toolCallId"])
        self.log = log.bind(question=n, session_id=self.session_id, tool_call_id=self.tool_call_id)
        self.failure: str | None = None
        self.submission = self.body()

    def withdraw(self, by: str, feedback: str, budget: float | None = None) -> None:
        """Cancel it in the daemon (the prompt is edited to say why), unless it is settled."""
        self.cancel(by, budget)
        if self._cancel.is_set() and not self.done:
            self.cancel_feedback = feedback

    async def run(self) -> None:
        try:
            await self._resolve()  # its record is kept (settled_rec, or read again by record())
        except Exception:
            self.log.exception("question_failed")
            self.failure = "the question failed"
        self.done = True
        self.submitted.set()  # it ended first

    async def _fallback(self, why: str) -> dict[str, Any] | None:
        self.failure = why
        self.log.warning("question_not_asked", reason=why)
        return None

    async def record(self) -> dict[str, Any] | None:
        """The settled record (read again when a cancel found it answered first), or None."""
        if self.settled_rec is not None:
            return self.settled_rec
        if self.record_id is None:
            return None
        try:
            return await self.proxy.daemon.get(self.record_id, digest=self.digest)
        except DaemonError as e:
            self.log.warning("question_record_unreadable", error=str(e))
            return None


class QuestionSet:
    """Questions asked together: how the set is ended (:meth:`cancel`) and its open questions withdrawn."""

    def __init__(self, budget: float, by: str, feedback: str) -> None:
        self.questions: list[QuestionRequest] = []
        self.done = False
        self.answer_agent = True
        self.cancel_by, self.cancel_feedback = by, feedback
        self.budget = budget
        self._cancel = asyncio.Event()

    def cancel(self, by: str, feedback: str, budget: float | None = None, *, answer: bool = True) -> None:
        """End it: the open questions withdrawn (their prompts say ``feedback``); the agent answered when
        ``answer``."""
        if self.done or self._cancel.is_set():
            return
        self.cancel_by, self.cancel_feedback, self.answer_agent = by, feedback, answer
        if budget is not None:
            self.budget = budget
        self._cancel.set()

    async def withdraw_questions(self, by: str, feedback: str) -> None:
        """Withdraw the questions still open (bounded by the budget)."""
        live = [q for q in self.questions if not q.done]
        for q in live:
            q.withdraw(by, feedback, self.budget)
        tasks = [q.task for q in live if q.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=self.budget + 2.0)
