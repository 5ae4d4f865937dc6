"""One ``elicitation/create`` from the agent, answered from the room (:mod:`bot.acp.elicitation`).

The form becomes one question request per field, submitted in order; the proxy long-polls them until every
one is answered (``accept`` with the content), one is declined (``decline``; the others are withdrawn) or the
turn ends: ``session/cancel``, ``$/cancel_request`` for this request, a question timing out, the daemon
losing one (``cancel``; the pending ones are cancelled in the daemon). A record is taken only when it carries
the digest of the body sent for it. A form the room cannot ask (an unknown field type) is answered ``cancel``.

A client that advertised elicitation gets the request too (under the proxy's own id): the first answer wins.
The client first: its answer goes to the agent and the questions are withdrawn in the room. The room first:
the client is sent ``$/cancel_request`` for it. A client's error reply leaves the room to answer.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from bot.acp import outcomes
from bot.acp.daemon_client import DaemonError
from bot.acp.elicitation import Field, FormError, form_fields, result, submissions
from bot.acp.ids import FWD_PREFIX
from bot.acp.relay import in_thread
from bot.util.digest import submission_digest

if TYPE_CHECKING:
    from bot.acp.request import Host

    class FormHost(Host, Protocol):
        """What a form needs of the proxy beyond a request's: the client's side."""

        fwd_id: str
        forwarded: dict[str, asyncio.Future[dict[str, Any]]]
        client_elicitation: bool | None

        def relay_to_client(self, data: bytes) -> None: ...

log = structlog.get_logger("bot.acp")
CANCEL = {"action": "cancel"}
ELSEWHERE = "withdrawn: answered in the editor"


class FormRequest:
    """One elicitation: its questions in the daemon, its cancel and its answer to the agent."""

    def __init__(self, proxy: FormHost, msg: dict[str, Any], n: int) -> None:
        self.proxy = proxy
        self.n = n
        self.rpc_id: Any = msg["id"]
        self.params: dict[str, Any] = msg["params"]
        sid = self.params.get("sessionId")
        self.session_id = sid if isinstance(sid, str) else None
        self.key = f"{proxy.proxy_id}:{n}"
        self.forwarded = False
        self.done = False
        self.withdrawn = False
        self.cancel_by = "client"
        self._cancel = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.log = log.bind(rpc_id=self.rpc_id, session_id=self.session_id, elicitation=True)

    def cancel(self, by: str, budget: float | None = None, *, answer: bool = True, withdrawn: bool = False) -> None:
        """The turn was cancelled (or the agent withdrew the request): the form is answered ``cancel``."""
        if self.done or self._cancel.is_set():
            return
        self.cancel_by, self.withdrawn = by, withdrawn
        self._cancel.set()

    async def run(self) -> None:
        try:
            answer = await self._resolve()
        except Exception:
            self.log.exception("elicitation failed; answering cancel")
            answer = CANCEL
        self.done = True
        if self.withdrawn:
            await self.proxy.send_agent(outcomes.withdrawn_error(self.rpc_id))
        else:
            await self.proxy.answer(self.rpc_id, answer)

    async def _race(self, aw: Any) -> Any:
        """``aw``'s result, or raise CancelledError-free ``_Cancelled`` when a cancel comes first."""
        task = asyncio.ensure_future(aw)
        waiter = asyncio.ensure_future(self._cancel.wait())
        try:
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise _Cancelled
        return task.result()

    async def _resolve(self) -> dict[str, Any]:
        try:
            fields = form_fields(self.params)
        except FormError as e:
            self.log.warning("elicitation the room cannot ask; answering cancel", reason=str(e))
            return CANCEL
        if self.session_id is None:
            return CANCEL
        bodies = submissions(fields, session_id=self.session_id, key=self.key,
                             tool_call_id=str(self.params.get("toolCallId") or f"elicitation-{self.n}"))
        cfg = self.proxy.cfg
        cwd = self.proxy.cwd_by_session.get(self.session_id)
        for b in bodies:
            b.update({"label": cfg.label} if cfg.label else {}, **({"cwd": cwd} if cwd else {}))
        recs: list[dict[str, Any]] = []
        room = asyncio.ensure_future(self._ask_room(fields, bodies, recs))
        if not self.proxy.client_elicitation:
            return await room
        fid = f"{FWD_PREFIX}{self.proxy.fwd_id}:e{self.n}"
        client = asyncio.ensure_future(self._ask_client(fid))
        try:
            await asyncio.wait({room, client}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.proxy.forwarded.pop(fid, None)
        if room.done():
            client.cancel()
            await in_thread(self.proxy.relay_to_client, _line(
                {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": fid}}))
            return room.result()
        room.cancel()
        await asyncio.gather(room, return_exceptions=True)
        self.cancel_by = "client"
        await self._cancel_all(bodies, recs, ELSEWHERE)
        self.log.info("elicitation answered in the editor first; its questions withdrawn in the room")
        return client.result()

    async def _ask_client(self, fid: str) -> dict[str, Any]:
        """The client's answer to the elicitation sent to it under ``fid``; never returns on an error reply."""
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.proxy.forwarded[fid] = fut
        await in_thread(self.proxy.relay_to_client, _line({"jsonrpc": "2.0", "id": fid, "method": "elicitation/create",
                                                           "params": self.params}))
        reply = await fut
        answer = reply.get("result")
        while not isinstance(answer, dict) or answer.get("action") not in ("accept", "decline", "cancel"):
            await asyncio.Event().wait()  # an error, or the proxy ending: the room answers
        return dict(answer)

    async def _ask_room(
        self, fields: list[Field], bodies: list[dict[str, Any]], recs: list[dict[str, Any]]
    ) -> dict[str, Any]:
        cfg = self.proxy.cfg
        try:
            for body in bodies:
                deadline = asyncio.get_running_loop().time() + cfg.connect_timeout
                recs.append(await self._race(self.proxy.daemon.submit_retrying(body, deadline)))
            self.log.info("elicitation submitted", request_ids=[r["id"] for r in recs])
            return await self._wait(fields, bodies, recs)
        except _Cancelled:
            await self._cancel_all(bodies, recs)
            return CANCEL
        except DaemonError as e:
            self.log.warning("the daemon did not take the elicitation; answering cancel", error=str(e))
            await self._cancel_all(bodies, recs)
            return CANCEL

    async def _wait(
        self, fields: list[Field], bodies: list[dict[str, Any]], recs: list[dict[str, Any]]
    ) -> dict[str, Any]:
        wait = self.proxy.cfg.poll_wait
        while any(r.get("state") == "pending" for r in recs):
            if any(r.get("state") != "pending" and not (r.get("outcome") or {}).get("answers") for r in recs):
                break  # one declined, timed out or cancelled: the form is over
            i = next(i for i, r in enumerate(recs) if r.get("state") == "pending")
            digest = submission_digest(bodies[i])
            got = await self._race(self.proxy.daemon.get(recs[i]["id"], wait=wait, digest=digest))
            if got is None:
                raise DaemonError("the daemon forgot a question")
            recs[i] = got
            for j, r in enumerate(recs):  # another question may have been answered meanwhile
                if j != i and r.get("state") == "pending":
                    recs[j] = await self.proxy.daemon.get(r["id"], digest=submission_digest(bodies[j])) or r
        await self._cancel_all(bodies, recs)
        answer = result(fields, recs)
        self.log.info("elicitation answered", action=answer["action"])
        return answer

    async def _cancel_all(
        self, bodies: list[dict[str, Any]], recs: list[dict[str, Any]], why: str | None = None
    ) -> None:
        for body, rec in zip(bodies, recs, strict=False):
            if rec.get("state") != "pending":
                continue
            try:
                await self.proxy.daemon.cancel_retrying(
                    rec["id"], self.cancel_by, self.proxy.cfg.cancel_budget, key=body["key"],
                    digest=submission_digest(body), feedback=why,
                )
            except DaemonError as e:
                self.log.warning("could not cancel a question in the daemon", request_id=rec["id"], error=str(e))


class _Cancelled(Exception):
    """A cancel came first."""


def _line(msg: dict[str, Any]) -> bytes:
    return (json.dumps(msg, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
