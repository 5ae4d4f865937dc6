"""One request a door submits to the daemon, from arrival to its answer (a small state machine).

submitted -> pending (long-polls) -> settled: the agent gets the record's outcome. A cancel (``session/cancel``,
``$/cancel_request``, the client or the agent leaving) at any point cancels the request in the daemon; when the
daemon says someone answered first, the agent gets that answer instead, so the agent, the record and the room always
agree. Params that do not fit (``invalid``, set by the door that reads them) never reach the daemon: they get the
fallback answer at once, as a request the daemon refused does. So does a request whose key the daemon holds for
another body (409 ``key_conflict``) or whose record is not the one sent (its digest is not this request's): the agent
is never told what was decided for something else.

The result is the record's, in the daemon's (ACP) form (:mod:`bot.door.outcomes`); a door reads the params its agent
sent (:class:`bot.acp.request.Request`) or writes them itself (:mod:`bot.door.questions`, :mod:`bot.codex.proxy`)
and says the result to its agent in the agent's own words.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any, Protocol

import structlog

from bot.door import outcomes
from bot.door.config import ProxyConfig
from bot.door.daemon_client import (
    DaemonBackoff,
    DaemonClient,
    DaemonError,
    DaemonRefused,
    DaemonUnavailable,
    SubmitState,
    retrying,
)
from bot.door.inflight import discard, record_to_cancel
from bot.util.digest import submission_digest

log = structlog.get_logger("bot.acp")


def proxy_fields(body: dict[str, Any], *, key: str, label: str | None, cwd: str | None) -> dict[str, Any]:
    """``body`` with the fields a proxy sets on every submission it makes (bot.util.digest's ``EXTRAS``), never
    its agent: its ``key``, and its ``label`` and the session's ``cwd`` when they are set."""
    body["key"] = key
    if label:
        body["label"] = label
    if cwd:
        body["cwd"] = cwd
    return body


def request_timing(rec: dict[str, Any], asked_at: float, told_at: float, agent_told: float) -> dict[str, Any] | None:
    """Where one request's time went, the fields of its ``request_timing`` event (bot/room/timing.py logs the
    room's side), in ms: asked -> submitted (the daemon's clock), settled -> proxy told (the long-poll's answer)
    -> agent told; None when the settled record ``rec``'s times cannot be read. The floats are epoch seconds:
    the agent's request read, the proxy told, the agent told."""
    try:
        settled, submitted = (
            datetime.fromisoformat(str(at).replace("Z", "+00:00")).timestamp()
            for at in ((rec.get("outcome") or {}).get("decided_at"), rec.get("requested_at"))
        )
    except ValueError:
        return None
    return {
        "request_id": rec.get("id"),
        "asked_to_submit_ms": round((submitted - asked_at) * 1000, 1),
        "settled_to_proxy_ms": round((told_at - settled) * 1000, 1),
        "proxy_to_agent_ms": round((agent_told - told_at) * 1000, 1),
    }


class Host(Protocol):
    """What a request needs of the proxy that holds it (each door's proxy is one)."""

    cfg: ProxyConfig
    proxy_id: str
    daemon: DaemonClient
    cwd_by_session: dict[str, str]
    used_keys: dict[str, str]  # session id -> the key of a request of it the daemon took

    async def answer(self, rpc_id: Any, result: dict[str, Any]) -> None: ...

    async def send_agent(self, msg: dict[str, Any]) -> None: ...

    async def forward(self, req: DaemonRequest) -> None: ...

    async def claimed(self, session_id: str, wait: float = 2.0) -> None: ...


class DaemonRequest:
    """One request: its submission, its polls, its cancel and its answer to the agent."""

    def __init__(self, proxy: Host, msg: dict[str, Any], n: int) -> None:
        self.asked_at = time.time()  # the agent's request read
        self.proxy = proxy
        self.msg = msg
        self.n = n
        self.rpc_id: Any = msg["id"]
        self.params: dict[str, Any] = msg["params"]  # as sent: what the daemon gets and digests
        self.invalid: str | None = None  # why the params do not fit (a door that reads them sets it)
        self.session_id: str | None = None
        self.tool_call_id: str | None = None
        self.key = f"{proxy.proxy_id}:{n}"  # proxy_id is the run's secret: the key proves the request is ours
        self.digest = ""  # what every record the daemon gives back must carry (set when submitting)
        self.record_id: str | None = None
        self.forwarded = False
        self.done = False
        self.cancel_by = "client"
        self.cancel_feedback: str | None = None
        self.withdrawn = False
        self.cancel_budget = proxy.cfg.cancel_budget
        self.answer_agent = True
        self._cancel = asyncio.Event()
        self.submitted = asyncio.Event()  # the daemon holds it (:mod:`bot.door.questions` waits for it)
        self.log = log.bind(rpc_id=self.rpc_id, session_id=self.session_id, tool_call_id=self.tool_call_id)
        self.task: asyncio.Task[None] | None = None
        self.submission: dict[str, Any] = {}
        self.sent = SubmitState()  # whether the daemon may hold the request unbeknown to us
        self.resubmits = DaemonBackoff(first=0.2, cap=5.0)  # never a tight loop when the daemon keeps forgetting
        self.settled_rec: dict[str, Any] | None = None  # the settled record, with when the proxy was told
        self.told_at = 0.0

    def cancel(self, by: str, budget: float | None = None, *, answer: bool = True, withdrawn: bool = False) -> None:
        """Ask for this request to be cancelled in the daemon (the agent then gets what the daemon holds)."""
        if self.done or self.forwarded or self._cancel.is_set():
            return
        self.cancel_by, self.answer_agent, self.withdrawn = by, answer, withdrawn
        self.cancel_feedback = outcomes.WITHDRAWN if withdrawn else None
        if budget is not None:
            self.cancel_budget = budget
        self._cancel.set()

    def body(self) -> dict[str, Any]:
        """The daemon submission: the params (the door's own), plus the proxy's key, label and the session's cwd."""
        cwd = self.proxy.cwd_by_session.get(self.session_id or "")
        return proxy_fields(dict(self.params), key=self.key, label=self.proxy.cfg.label, cwd=cwd)

    async def run(self) -> None:
        try:
            result = await self._resolve()
        except Exception:
            self.log.exception("permission_request_failed", message="answering cancelled")
            result = outcomes.cancelled()
        self.done = True
        if result is None or not self.answer_agent:
            return
        if self.withdrawn and outcomes.is_cancelled(result):
            await self.proxy.send_agent(outcomes.withdrawn_error(self.rpc_id))
        else:
            await self.proxy.answer(self.rpc_id, result)
        timing = self.settled_rec and request_timing(self.settled_rec, self.asked_at, self.told_at, time.time())
        if timing:
            self.log.info("request_timing", **timing)

    async def _race(self, task: asyncio.Task[Any]) -> bool:
        """Wait for ``task`` or a cancel; True when the task finished and no cancel came."""
        if not self._cancel.is_set():
            waiter = asyncio.ensure_future(self._cancel.wait())
            try:
                await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
        return task.done() and not self._cancel.is_set()

    async def _resolve(self) -> dict[str, Any] | None:
        cfg = self.proxy.cfg
        body = self.submission
        self.digest = submission_digest(body) or ""  # "" matches no record: fail closed
        if self._cancel.is_set():
            return outcomes.cancelled()
        if self.invalid is not None:
            return await self._fallback(f"not a valid request ({self.invalid})")
        if self.session_id is not None:  # claimed at session/new; else now (a hook's twin must be the claimer's)
            await self.proxy.claimed(self.session_id, min(2.0, cfg.connect_timeout / 4))
        deadline = asyncio.get_running_loop().time() + cfg.connect_timeout
        submit = asyncio.ensure_future(self.proxy.daemon.submit_retrying(body, deadline, self.sent))
        if not await self._race(submit):
            return await self._cancel_unanswered(submit)
        try:
            rec = submit.result()
        except DaemonUnavailable as e:
            return await self._fallback(f"daemon unreachable for {cfg.connect_timeout:g}s ({e})")
        except DaemonRefused as e:
            return await self._fallback(f"daemon refused the request ({e})")
        self.record_id = rec["id"]
        self.submitted.set()
        if self.session_id is not None:
            self.proxy.used_keys[self.session_id] = self.key
        completed = "toolCallContext" in body
        self.log.info("permission_request_submitted", request_id=rec["id"], state=rec.get("state"), completed=completed)
        while rec.get("state", "pending") == "pending":
            poll = asyncio.ensure_future(self._poll(rec["id"], body))
            if not await self._race(poll):
                if self.sent.in_doubt:  # the daemon forgot the request and it was being sent again
                    return await self._cancel_unanswered(poll)
                discard(poll)
                return await self._cancel_in_daemon(rec["id"], self.cancel_budget)
            try:
                rec = poll.result()
            except DaemonRefused as e:  # a record that is not ours (WrongRecord) or a refused re-submission
                return await self._fallback(f"daemon refused the request ({e})")
            self.record_id = rec["id"]
        self.told_at, self.settled_rec = time.time(), rec
        result = outcomes.result_from_record(rec)
        option_id = result["outcome"].get("optionId")
        self.log.info("permission_request_settled", request_id=rec["id"], state=rec.get("state"), option_id=option_id)
        return result

    async def _poll(self, request_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """One long-poll, retried while the daemon is away; re-submits when it forgot the id."""
        daemon = self.proxy.daemon
        poll_wait = self.proxy.cfg.poll_wait
        rec = await retrying(lambda: daemon.get(request_id, wait=poll_wait, digest=self.digest), DaemonBackoff())
        if rec is not None:
            return rec
        pause = self.resubmits.delay()
        self.log.warning(
            "request_unknown_resubmitting", message="the daemon does not know the request; submitting it again",
            request_id=request_id, after_seconds=round(pause, 2),
        )
        await asyncio.sleep(pause)
        return await daemon.submit_retrying(body, state=self.sent)

    async def _cancel_unanswered(self, pending: asyncio.Future[dict[str, Any]]) -> dict[str, Any]:
        """A cancel came while the daemon had not answered a submission (:mod:`bot.door.inflight`)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.cancel_budget
        try:
            rid = await record_to_cancel(self.proxy.daemon, pending, self.submission, self.sent, deadline)
        except (TimeoutError, DaemonError) as e:
            self.log.warning(  # n: the request's number in this run (its key, the run's secret, is never logged)
                "in_flight_request_not_cancelled", request_id=self.record_id, n=self.n, error=str(e) or type(e).__name__
            )
            return outcomes.cancelled()
        if rid is None:
            self.log.info("permission_request_cancelled_before_submit")
            return outcomes.cancelled()
        self.record_id = rid
        return await self._cancel_in_daemon(rid, max(0.1, deadline - loop.time()))

    async def _cancel_in_daemon(self, request_id: str, budget: float) -> dict[str, Any]:
        """Cancel in the daemon (bounded); the agent's answer: cancelled, or the answer that came first."""
        daemon = self.proxy.daemon
        try:
            async with asyncio.timeout(budget + 0.5):
                rec = await daemon.cancel_retrying(
                    request_id, self.cancel_by, budget, key=self.key, digest=self.digest, feedback=self.cancel_feedback
                )
                current = None if rec is not None else await daemon.get(request_id, digest=self.digest)
        except (TimeoutError, DaemonError) as e:
            self.log.warning("daemon_cancel_failed", request_id=request_id, error=str(e) or type(e).__name__)
            return outcomes.cancelled()
        result = outcomes.after_cancel(rec, current)
        if rec is not None:
            self.log.info("permission_request_cancelled", request_id=request_id, by=self.cancel_by)
        elif not outcomes.is_cancelled(result):
            option_id = result["outcome"].get("optionId")
            self.log.info("answered_before_cancel", message="the agent gets that answer", request_id=request_id,
                          option_id=option_id)
        return result

    async def _fallback(self, why: str) -> dict[str, Any] | None:
        if self.proxy.cfg.fallback == "forward":
            self.log.warning("fallback_forwarded", reason=why)
            self.forwarded = True
            await self.proxy.forward(self)
            return None
        result = outcomes.reject_result(self.params)
        self.log.warning("fallback_rejected", reason=why, option_id=result["outcome"].get("optionId"))
        return result
