"""One ``elicitation/create`` from the agent, from arrival to its answer (:class:`Elicitation`).

The form's questions (:mod:`bot.door.forms`) go to the room, one daemon request each
(:class:`bot.door.questions.QuestionRequest`), submitted in the form's order; the agent gets
``{"action": "accept", "content": {...}}`` once every one is answered, ``decline`` as soon as one is
declined, ``cancel`` when one times out, the turn is cancelled (``session/cancel``), the agent withdraws the
request (``$/cancel_request``) or the proxy's run ends. A number that is not one is asked again (with why),
up to :data:`TRIES` times, then the form is declined. Whatever ends the form withdraws the questions still
open, so their prompts say so.

When the client advertised elicitation (for this mode) it gets the request too, under a fresh id; the first
answer wins: the client's reply goes to the agent as it is and the room's questions are withdrawn (an error
reply is no answer: the room still may give one), or the
room's answer goes and the client's request is withdrawn with ``$/cancel_request`` (its late reply dropped).
A form the room cannot ask (not ACP, a required field of an unknown kind) is left to such a client, else
declined; so is one whose questions the daemon refused or could not take. A request-scoped form (``requestId``,
no ``sessionId``) is asked in the room like any other, in a daemon session of its own, and is cancelled when the
client cancels that request (``$/cancel_request``); one tied to neither is not ACP.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import structlog

from bot.acp import messages
from bot.acp.request import Host
from bot.door import forms
from bot.door.ids import FWD_PREFIX, id_key
from bot.door.questions import QuestionRequest, QuestionSet
from bot.door.relay import FdSink
from bot.events import kinds

log = structlog.get_logger("bot.acp")

TRIES = 3  # a number question is asked at most this many times
ACCEPT, DECLINE, CANCEL = "accept", "decline", "cancel"


def action(what: str, content: dict[str, Any] | None = None) -> dict[str, Any]:
    """An ACP ``CreateElicitationResponse`` result."""
    return {"action": what, "content": content} if content is not None else {"action": what}


class FormHost(Host, Protocol):
    """What an elicitation needs of the proxy (:class:`bot.acp.proxy.Proxy` is one)."""

    fwd_id: str
    client_elicitation: frozenset[str]
    to_client: FdSink | None
    withdrawn_fwd: set[str]

    def next_n(self) -> int: ...

    async def ask_client(self, msg: dict[str, Any], fresh: str) -> dict[str, Any]: ...

    async def cancel_at_client(self, fresh: str) -> None: ...


class Elicitation(QuestionSet):
    """One elicitation: its questions in the room, its copy at the client, its answer to the agent."""

    def __init__(self, proxy: FormHost, msg: dict[str, Any], n: int) -> None:
        self.proxy = proxy
        self.msg = msg
        self.n = n
        self.rpc_id: Any = msg["id"]
        params = msg["params"]
        self.mode = params.get("mode") if isinstance(params.get("mode"), str) else None
        self.session_id: str | None = None
        self.form: forms.Form | None = None
        tool_call_id: str | None = None
        request_id: Any = None
        self.invalid: str | None = None
        try:
            self.session_id, tool_call_id, request_id = self.read(params)
        except (messages.BadMessage, forms.BadForm) as e:
            self.invalid = str(e)
        # The daemon needs a session. A request-scoped one (no sessionId: tied to the client's request, say during
        # session/new) gets one of its own, named by this run and form: a request id is the client's JSON-RPC id
        # (0, 1, null, any text), which another run (maybe another room's) uses too and may not be a safe id.
        self.room_session = self.session_id or f"request:{proxy.fwd_id}:{n}"
        self.tied_to = id_key(request_id) if self.session_id is None else None  # the client's request, if that
        self.tool_call_id = tool_call_id or f"elicitation-{proxy.fwd_id}-{n}"
        super().__init__(proxy.cfg.cancel_budget, "client", "the agent's turn was cancelled")
        self.fwd: str | None = None  # the id the client holds it under
        self.task: asyncio.Task[None] | None = None
        self.log = log.bind(
            rpc_id=self.rpc_id,
            session_id=self.session_id,
            elicitation=n,
            mode=self.mode,
            **({} if self.session_id else {"tied_to_request": str(request_id)[:80]}),
        )

    def read(self, params: dict[str, Any]) -> tuple[str | None, str | None, Any]:
        """Read the request's form into ``self.form``: (session id, tool call id, request id); ``BadMessage`` or
        ``BadForm`` when it cannot be asked."""
        if "sessionId" not in params and "requestId" not in params:
            raise messages.BadMessage("neither sessionId nor requestId: ACP ties an elicitation to one of them")
        req = messages.elicitation_request(params)
        if self.mode == "form":
            self.form = forms.form_of(params.get("requestedSchema"))
        else:
            self.form = forms.url_form(req.message, str(params.get("url")))
        return getattr(req, "session_id", None), getattr(req, "tool_call_id", None), getattr(req, "request_id", None)

    def reply(self, reply: dict[str, Any]) -> dict[str, Any]:
        """The JSON-RPC reply for the agent (without its id) from the form's: an elicitation's own."""
        return reply

    async def run(self) -> None:
        try:
            reply = await self._resolve()
        except Exception:
            self.log.exception("elicitation_failed", message="answering cancel")
            reply = {"result": action(CANCEL)}
        self.done = True
        self.log.info("elicitation_answered", outcome=(reply.get("result") or {}).get("action", "error"))
        if self.answer_agent:
            await self.proxy.send_agent({"jsonrpc": "2.0", "id": self.rpc_id, **self.reply(reply)})

    async def _resolve(self) -> dict[str, Any]:
        """The JSON-RPC reply for the agent, without its id: ``{"result": ...}`` or the client's ``error``."""
        if self.invalid is not None:
            self.log.warning("elicitation_not_askable", reason=self.invalid)
        room = asyncio.ensure_future(self._room()) if self.form is not None and self.invalid is None else None
        client_may = self.mode in self.proxy.client_elicitation and self.proxy.to_client is not None
        client = asyncio.ensure_future(self._client()) if client_may else None
        stop = asyncio.ensure_future(self._cancel.wait())
        waiting: set[asyncio.Future[Any]] = {t for t in (room, client, stop) if t is not None}
        try:
            while room is not None or client is not None:
                done, waiting = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if stop in done:
                    self.log.info("elicitation_cancelled", by=self.cancel_by)
                    await self._withdraw_room(room, self.cancel_by, self.cancel_feedback)
                    await self._withdraw_client(client)
                    return {"result": action(CANCEL)}
                if client is not None and client in done:
                    reply = client.result()
                    client = None
                    if "result" in reply or room is None:
                        self.log.info("elicitation_answered_by_client")
                        await self._withdraw_room(room, "client", "answered in the editor")
                        return {k: reply[k] for k in ("result", "error") if k in reply} or {"result": action(CANCEL)}
                    self.log.info("elicitation_client_unable", message="the room still may answer")
                if room is not None and room in done:
                    result = room.result()
                    room = None
                    if result is None and client is not None:
                        continue  # the room could not ask it: the client still may answer
                    await self._withdraw_client(client)
                    return {"result": result or action(DECLINE)}
            return {"result": action(DECLINE)}
        finally:
            stop.cancel()

    # ---- the room

    def _ask(self, ask: forms.Ask, index: int, count: int, note: str = "") -> QuestionRequest:
        n = self.proxy.next_n()
        body = forms.question_body(
            ask,
            session_id=self.room_session,
            tool_call_id=f"{self.tool_call_id}#{ask.key}" + (f"#{n}" if note else ""),
            index=index,
            count=count,
            note=note,
        )
        q = QuestionRequest(self.proxy, body, n)
        self.questions.append(q)
        q.task = asyncio.create_task(q.run())
        return q

    async def _room(self) -> dict[str, Any] | None:
        """The form answered in the room: the result for the agent, or None when the room could not ask it."""
        assert self.form is not None
        asks = self.form.asks
        open_: dict[asyncio.Task[None], tuple[int, forms.Ask, QuestionRequest, int]] = {}
        for i, ask in enumerate(asks, 1):
            q = self._ask(ask, i, len(asks))
            assert q.task is not None
            open_[q.task] = (i, ask, q, 1)
            await q.submitted.wait()  # posted in the form's order
        content: dict[str, Any] = {}
        while open_:
            done, _ = await asyncio.wait(set(open_), return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                i, ask, q, tries = open_.pop(t)
                if q.failure is not None:
                    await self._withdraw_room(None, "agent", "the question could not be asked")
                    return None
                rec = await q.record()
                got = forms.answered(rec) if rec is not None else forms.Answered(None, (), None)
                if got.option_id is None or got.option_id == kinds.DECLINE:
                    what = CANCEL if got.option_id is None else DECLINE
                    why = "another question of the form was declined" if what == DECLINE else "the form was cancelled"
                    await self._withdraw_room(None, "agent", why)
                    return action(what)
                value = forms.value_of(ask, got)
                if isinstance(value, str):
                    if tries >= TRIES:
                        self.log.info("elicitation_declined_no_usable_answer", question=ask.key, tries=tries)
                        await self._withdraw_room(None, "agent", "no usable answer was given")
                        return action(DECLINE)
                    again = self._ask(ask, i, len(asks), note=f"⚠ {value}: please answer again.")
                    assert again.task is not None
                    open_[again.task] = (i, ask, again, tries + 1)
                    continue
                content.update(value)
        return action(ACCEPT) if self.mode == "url" else action(ACCEPT, content)

    async def _withdraw_room(self, room: asyncio.Future[Any] | None, by: str, feedback: str) -> None:
        if room is not None and not room.done():
            room.cancel()
        await self.withdraw_questions(by, feedback)

    # ---- the client

    async def _client(self) -> dict[str, Any]:
        """The request at the client under a fresh id; its reply (a JSON-RPC message)."""
        self.fwd = f"{FWD_PREFIX}{self.proxy.fwd_id}:e{self.n}"
        return await self.proxy.ask_client(self.msg, self.fwd)

    async def _withdraw_client(self, client: asyncio.Future[Any] | None) -> None:
        """``$/cancel_request`` to the client for its copy (its late reply is dropped)."""
        if client is None or self.fwd is None:
            return
        if not client.done():
            client.cancel()
        self.proxy.withdrawn_fwd.add(self.fwd)
        try:
            await self.proxy.cancel_at_client(self.fwd)
        except OSError as e:
            self.log.info("client_copy_withdraw_failed", error=str(e) or type(e).__name__)
