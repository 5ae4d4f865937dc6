"""One Codex ``item/tool/requestUserInput`` (:class:`UserInput`): its questions in the room, one prompt each
(:class:`bot.door.questions.QuestionRequest`, posted in Codex's order), the answers sent to Codex once as
``{"answers": {<question id>: {"answers": [...]}}}`` (:mod:`bot.codex.wire`).

Codex gets the answers once every question is answered. A question declined, or one the room could not ask,
ends it: the questions still open are withdrawn and Codex gets the answers given so far (``{"answers": {}}``
when none). When the turn ends, Codex resolves the request itself (``serverRequest/resolved``) or the client
interrupts it, the open questions are withdrawn and their prompts say so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog

from bot.codex import wire
from bot.door import forms
from bot.door.questions import QuestionRequest, QuestionSet
from bot.door.request import Host

log = structlog.get_logger("bot.codex")


class UserInput(QuestionSet):
    """One ``requestUserInput``: its questions in the room and its answer to Codex."""

    def __init__(
        self, proxy: Host, msg: dict[str, Any], n: int, asks: list[forms.Ask], next_n: Callable[[], int]
    ) -> None:
        self.proxy = proxy
        self.rpc_id: Any = msg["id"]
        params = msg["params"]
        self.session_id = str(params["threadId"])
        self.turn_id = params.get("turnId")
        self.item_id = str(params["itemId"])
        self.asks = asks
        self.n = n
        self._next_n = next_n  # the proxy's: each question is a request of the run, numbered in it
        super().__init__(proxy.cfg.cancel_budget, "client", "the turn ended")
        self.task: asyncio.Task[None] | None = None
        self.log = log.bind(rpc_id=self.rpc_id, session_id=self.session_id, item_id=self.item_id)

    withdraw = QuestionSet.cancel  # ended as every pending request of the proxy is

    async def run(self) -> None:
        try:
            answers = await self._resolve()
        except Exception:
            self.log.exception("user_input_failed", message="answering with no answers")
            answers = {}
        self.done = True
        if self.answer_agent:
            await self.proxy.answer(self.rpc_id, wire.answers_reply(answers))
        self.log.info("user_input_answered", answered=len(answers), questions=len(self.asks))

    async def _resolve(self) -> dict[str, list[str]]:
        room = asyncio.ensure_future(self._room())
        stop = asyncio.ensure_future(self._cancel.wait())
        try:
            done, _ = await asyncio.wait({room, stop}, return_when=asyncio.FIRST_COMPLETED)
            if room in done:
                return room.result()
            room.cancel()
            self.log.info("user_input_withdrawn", by=self.cancel_by)
            await self.withdraw_questions(self.cancel_by, self.cancel_feedback)
            return {}
        finally:
            stop.cancel()

    async def _room(self) -> dict[str, list[str]]:
        answers: dict[str, list[str]] = {}
        open_: dict[asyncio.Task[None], tuple[forms.Ask, QuestionRequest]] = {}
        count = len(self.asks)
        for i, ask in enumerate(self.asks, 1):
            body = forms.question_body(ask, session_id=self.session_id, tool_call_id=f"{self.item_id}#{ask.key}",
                                       index=i, count=count)
            q = QuestionRequest(self.proxy, body, self._next_n())
            self.questions.append(q)
            q.task = asyncio.create_task(q.run())
            open_[q.task] = (ask, q)
            await q.submitted.wait()  # posted in Codex's order
        while open_:
            done, _ = await asyncio.wait(set(open_), return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                ask, q = open_.pop(t)
                rec = await q.record() if q.failure is None else None
                got = wire.answer_of(ask, forms.answered(rec)) if rec is not None else None
                if got is None:
                    why = "the question could not be asked" if q.failure else "another question was not answered"
                    self.log.info("user_input_ended_unanswered", question=ask.key, failure=q.failure)
                    await self.withdraw_questions("agent", why)
                    return answers
                answers[ask.key] = got
        return {a.key: answers[a.key] for a in self.asks if a.key in answers}  # in Codex's order
