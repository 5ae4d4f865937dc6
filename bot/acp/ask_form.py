"""One ``elicitation/create`` from the agent, answered from the room (:mod:`bot.acp.elicitation`).

The form becomes one question request per field, submitted in order; the proxy long-polls them until every
one is answered (``accept`` with the content), one is declined (``decline``; the others are withdrawn) or the
turn ends: ``session/cancel``, ``$/cancel_request`` for this request, a question timing out, the daemon
losing one (``cancel``; the pending ones are cancelled in the daemon). A record is taken only when it carries
the digest of the body sent for it. A form the room cannot ask (an unknown field type) is answered ``cancel``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import structlog

from bot.acp import outcomes
from bot.acp.daemon_client import DaemonError
from bot.acp.elicitation import Field, FormError, form_fields, result, submissions
from bot.util.digest import submission_digest

if TYPE_CHECKING:
    from bot.acp.request import Host

log = structlog.get_logger("bot.acp")
CANCEL = {"action": "cancel"}


class FormRequest:
    """One elicitation: its questions in the daemon, its cancel and its answer to the agent."""

    def __init__(self, proxy: Host, msg: dict[str, Any], n: int) -> None:
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

    async def _cancel_all(self, bodies: list[dict[str, Any]], recs: list[dict[str, Any]]) -> None:
        for body, rec in zip(bodies, recs, strict=False):
            if rec.get("state") != "pending":
                continue
            try:
                await self.proxy.daemon.cancel_retrying(
                    rec["id"], self.cancel_by, self.proxy.cfg.cancel_budget, key=body["key"],
                    digest=submission_digest(body),
                )
            except DaemonError as e:
                self.log.warning("could not cancel a question in the daemon", request_id=rec["id"], error=str(e))


class _Cancelled(Exception):
    """A cancel came first."""
