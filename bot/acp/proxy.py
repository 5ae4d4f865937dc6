"""The ACP proxy: start the agent, relay stdio both ways, take permission requests to the daemon.

Everything the proxy does not handle passes byte for byte (see :mod:`bot.acp.relay`).
It handles, from the agent, ``session/request_permission`` requests (submitted to the
daemon, answered from the settled record) and ``session/update`` tool-call notifications
(remembered, then relayed, to complete sparse requests); from the client,
``session/cancel`` (relayed, and the session's pending requests cancelled in the daemon)
and the answers to requests it forwarded itself in ``--fallback forward`` mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import uuid
from dataclasses import dataclass
from typing import Any, Literal

import structlog

from bot.acp.daemon_client import (
    Backoff,
    DaemonClient,
    DaemonError,
    DaemonRefused,
    DaemonUnavailable,
)
from bot.acp.log import configure_stderr_logging
from bot.acp.relay import FdSink, LineRelay, in_thread, read_fd, relay_thread
from bot.acp.toolcalls import ToolCallCache
from bot.discovery import DEFAULT_URL

log = structlog.get_logger("bot.acp")

CANCELLED: dict[str, Any] = {"outcome": {"outcome": "cancelled"}}
_FWD_PREFIX = "permission-bot:fwd:"
_FWD_MARK = _FWD_PREFIX.encode()


@dataclass
class ProxyConfig:
    """What ``permission-bot acp`` was asked to do."""

    command: list[str]
    url: str = DEFAULT_URL
    token: str | None = None
    label: str | None = None
    connect_timeout: float = 30.0
    fallback: Literal["forward", "reject"] = "reject"
    poll_wait: float = 30.0
    cancel_budget: float = 3.0  # how long one cancel may keep trying the daemon
    shutdown_budget: float = 1.5  # the same when the client or the agent goes away
    stdin_fd: int = 0
    stdout_fd: int = 1


def result_from_record(rec: dict[str, Any]) -> dict[str, Any]:
    """The ACP ``RequestPermissionResponse`` for a settled daemon record."""
    out = rec.get("outcome")
    oid = out.get("option_id") if isinstance(out, dict) else None
    if not isinstance(out, dict) or not isinstance(oid, str):
        return dict(CANCELLED)
    res: dict[str, Any] = {"outcome": {"outcome": "selected", "optionId": oid}}
    fb = out.get("feedback")
    if isinstance(fb, str) and fb:
        res["_meta"] = {"feedback": fb}
    return res


def reject_result(params: dict[str, Any]) -> dict[str, Any]:
    """A ``reject_once`` option when the request offers one, else the cancelled outcome."""
    opts = params.get("options")
    for o in opts if isinstance(opts, list) else []:
        if isinstance(o, dict) and o.get("kind") == "reject_once" and isinstance(o.get("optionId"), str):
            return {"outcome": {"outcome": "selected", "optionId": o["optionId"]}}
    return dict(CANCELLED)


def _discard(task: asyncio.Future[Any]) -> None:
    """Cancel ``task``, or take its exception so it is not reported as never retrieved."""
    if not task.done():
        task.cancel()
    elif not task.cancelled():
        task.exception()


def _dump(msg: Any) -> bytes:
    return (json.dumps(msg, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def _loads(line: bytes | bytearray) -> dict[str, Any] | None:
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return msg if isinstance(msg, dict) else None


class _FromAgent:
    """Line filter for agent -> client: takes permission requests, notes tool calls.

    It runs in the relay thread; what it finds is handed to the event loop, in order.
    """

    def __init__(self, proxy: Proxy, loop: asyncio.AbstractEventLoop) -> None:
        self._proxy = proxy
        self._loop = loop

    def wants(self, data: bytes | bytearray) -> bool:
        return b"request_permission" in data or b"tool_call" in data

    def inspect(self, line: bytes | bytearray) -> bool:
        msg = _loads(line)
        if msg is None:
            return True
        method = msg.get("method")
        if (
            method == "session/request_permission"
            and "id" in msg
            and isinstance(msg.get("params"), dict)
            and "result" not in msg
            and "error" not in msg
        ):
            self._loop.call_soon_threadsafe(self._proxy.on_permission_request, msg)
            return False
        if method == "session/update" and "id" not in msg:
            self._loop.call_soon_threadsafe(self._proxy.cache.observe, msg.get("params"), len(line))
        return True


class _FromClient:
    """Line filter for client -> agent: notes ``session/cancel``, takes answers to forwarded requests.

    It runs in the relay thread; what it finds is handed to the event loop.
    """

    def __init__(self, proxy: Proxy, loop: asyncio.AbstractEventLoop) -> None:
        self._proxy = proxy
        self._loop = loop

    def wants(self, data: bytes | bytearray) -> bool:
        return b"cancel" in data or (bool(self._proxy.forwarded) and _FWD_MARK in data)

    def inspect(self, line: bytes | bytearray) -> bool:
        msg = _loads(line)
        if msg is None:
            return True
        method = msg.get("method")
        if method == "session/cancel" and "id" not in msg:
            params = msg.get("params")
            sid = params.get("sessionId") if isinstance(params, dict) else None
            if isinstance(sid, str):
                self._loop.call_soon_threadsafe(self._proxy.cancel_session, sid)
            return True
        if method is None and isinstance(msg.get("id"), str):
            fut = self._proxy.forwarded.get(msg["id"])  # a dict read: safe from this thread
            if fut is not None:
                self._loop.call_soon_threadsafe(_set_result, fut, msg)
                return False
        return True


def _set_result(fut: asyncio.Future[Any], value: Any) -> None:
    if not fut.done():
        fut.set_result(value)


class _Request:
    """One ``session/request_permission`` from the agent, from arrival to its answer."""

    def __init__(self, proxy: Proxy, msg: dict[str, Any], n: int) -> None:
        self.proxy = proxy
        self.msg = msg
        self.n = n
        self.rpc_id: Any = msg["id"]
        self.params: dict[str, Any] = msg["params"]
        sid = self.params.get("sessionId")
        self.session_id = sid if isinstance(sid, str) else None
        tc = self.params.get("toolCall")
        tcid = tc.get("toolCallId") if isinstance(tc, dict) else None
        self.tool_call_id = tcid if isinstance(tcid, str) else None
        self.key = f"{proxy.proxy_id}:{n}"
        self.record_id: str | None = None
        self.forwarded = False
        self.done = False
        self.cancel_by = "client"
        self.cancel_budget = proxy.cfg.cancel_budget
        self.answer_agent = True
        self._cancel = asyncio.Event()
        self.log = log.bind(rpc_id=self.rpc_id, session_id=self.session_id, tool_call_id=self.tool_call_id)
        self.task: asyncio.Task[None] | None = None
        self.submission: dict[str, Any] = {}

    def cancel(self, by: str, budget: float | None = None, *, answer: bool = True) -> None:
        """Ask for this request to be cancelled (in the daemon) and answered cancelled."""
        if self.done or self.forwarded or self._cancel.is_set():
            return
        self.cancel_by = by
        self.answer_agent = answer
        if budget is not None:
            self.cancel_budget = budget
        self._cancel.set()

    def body(self) -> dict[str, Any]:
        """The daemon submission: the params as sent, plus key, label and toolCallContext."""
        cache = self.proxy.cache
        body = dict(self.params)
        clash = [k for k in ("key", "label", "toolCallContext") if k in body]
        if clash:
            self.log.warning("agent params carry fields the proxy sets; the proxy's values win", fields=clash)
        ctx = None
        tc = self.params.get("toolCall")
        if self.session_id is not None and isinstance(tc, dict):
            ctx = cache.completion(self.session_id, tc)
            cache.merge(self.session_id, tc)
        body["key"] = self.key
        if self.proxy.cfg.label:
            body["label"] = self.proxy.cfg.label
        if ctx:
            body["toolCallContext"] = ctx
            self.log.info("completing tool call from earlier updates", fields=sorted(ctx))
        return body

    async def run(self) -> None:
        try:
            result = await self._resolve()
        except Exception:
            self.log.exception("permission request failed; answering cancelled")
            result = dict(CANCELLED)
        self.done = True
        if result is not None and self.answer_agent:
            await self.proxy.answer(self.rpc_id, result)

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
        daemon = self.proxy.daemon
        body = self.submission
        if self._cancel.is_set():
            return dict(CANCELLED)
        deadline = asyncio.get_running_loop().time() + cfg.connect_timeout
        submit = asyncio.ensure_future(daemon.submit_retrying(body, deadline))
        if not await self._race(submit):
            if not submit.done():  # a POST may be on its way: give it a moment to tell us the id
                await asyncio.wait({submit}, timeout=min(1.0, self.cancel_budget))
            if submit.done() and not submit.cancelled() and submit.exception() is None:
                await self._cancel_in_daemon(submit.result()["id"])
            else:
                _discard(submit)
                self.log.info("permission request cancelled before the daemon had it")
            return dict(CANCELLED)
        try:
            rec = submit.result()
        except DaemonUnavailable as e:
            return await self._fallback(f"daemon unreachable for {cfg.connect_timeout:g}s ({e})")
        except DaemonRefused as e:
            return await self._fallback(f"daemon refused the request ({e})")
        self.record_id = rec["id"]
        self.log.info(
            "permission request submitted",
            request_id=rec["id"],
            state=rec.get("state"),
            completed="toolCallContext" in body,
        )
        while rec.get("state", "pending") == "pending":
            poll = asyncio.ensure_future(self._poll(rec["id"], body))
            if not await self._race(poll):
                _discard(poll)
                await self._cancel_in_daemon(self.record_id)
                return dict(CANCELLED)
            rec = poll.result()
            self.record_id = rec["id"]
        result = result_from_record(rec)
        self.log.info(
            "permission request settled",
            request_id=rec["id"],
            state=rec.get("state"),
            option_id=result["outcome"].get("optionId"),
        )
        return result

    async def _poll(self, request_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """One long-poll, retried while the daemon is away; re-submits when it forgot the id."""
        daemon = self.proxy.daemon
        backoff = Backoff()
        while True:
            try:
                rec = await daemon.get(request_id, wait=self.proxy.cfg.poll_wait)
            except DaemonUnavailable:
                await asyncio.sleep(backoff.delay())
                continue
            if rec is not None:
                return rec
            self.log.warning("daemon does not know the request; submitting it again", request_id=request_id)
            return await daemon.submit_retrying(body)

    async def _cancel_in_daemon(self, request_id: str) -> None:
        budget = self.cancel_budget
        try:
            rec = await asyncio.wait_for(
                self.proxy.daemon.cancel_retrying(request_id, self.cancel_by, budget), budget + 0.5
            )
        except (TimeoutError, DaemonError) as e:
            self.log.warning(
                "could not cancel the request in the daemon",
                request_id=request_id,
                error=str(e) or type(e).__name__,
            )
            return
        if rec is None:
            self.log.info("request was already settled; the agent gets cancelled", request_id=request_id)
        else:
            self.log.info("permission request cancelled", request_id=request_id, by=self.cancel_by)

    async def _fallback(self, why: str) -> dict[str, Any] | None:
        if self.proxy.cfg.fallback == "forward":
            self.log.warning("fallback: forwarding the permission request to the client", reason=why)
            self.forwarded = True
            await self.proxy.forward(self)
            return None
        result = reject_result(self.params)
        self.log.warning(
            "fallback: rejecting the permission request",
            reason=why,
            option_id=result["outcome"].get("optionId"),
        )
        return result


class Proxy:
    """One proxy run: the agent process, both pumps and the pending requests."""

    def __init__(self, cfg: ProxyConfig) -> None:
        self.cfg = cfg
        self.proxy_id = uuid.uuid4().hex[:16]
        self.cache = ToolCallCache()
        self.daemon = DaemonClient(cfg.url, cfg.token)
        self.requests: dict[int, _Request] = {}
        self.forwarded: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._n = 0
        self._to_agent: FdSink | None = None
        self._to_client: FdSink | None = None
        self._oversize_noted = False

    # ---- hooks called by the line filters (synchronous, on the relay's path)

    def on_permission_request(self, msg: dict[str, Any]) -> None:
        """Take a permission request off the relay and start resolving it."""
        self._n += 1
        req = _Request(self, msg, self._n)
        self.requests[req.n] = req
        req.log.info("permission request from agent")
        req.submission = req.body()  # now, while the cache holds what the agent said up to this line
        req.task = asyncio.create_task(req.run())

        def forget(_t: asyncio.Task[None]) -> None:
            self.requests.pop(req.n, None)

        req.task.add_done_callback(forget)

    def cancel_session(self, session_id: str) -> None:
        """The client cancelled a turn: cancel the session's pending requests."""
        hit = [r for r in self.requests.values() if r.session_id == session_id and not r.done]
        if hit:
            log.info("session/cancel: cancelling pending requests", session_id=session_id, count=len(hit))
        for r in hit:
            r.cancel("client")

    def _note_oversize(self, size: int) -> None:
        if not self._oversize_noted:
            self._oversize_noted = True
            log.warning("a line over the inspection limit is relayed uninspected", bytes=size)

    # ---- writing our own lines

    async def answer(self, rpc_id: Any, result: dict[str, Any]) -> None:
        """Send the agent a JSON-RPC result for one of its requests."""
        await self._send_agent({"jsonrpc": "2.0", "id": rpc_id, "result": result})

    async def _send_agent(self, msg: dict[str, Any]) -> None:
        if self._to_agent is None:
            return
        try:
            await in_thread(self._to_agent.write, _dump(msg))
        except OSError as e:
            log.info("could not write to the agent", error=str(e) or type(e).__name__)

    async def forward(self, req: _Request) -> None:
        """Fallback: send the request to the client under a fresh id, relay its answer back."""
        assert self._to_client is not None
        fresh = f"{_FWD_PREFIX}{self.proxy_id}:{req.n}"
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.forwarded[fresh] = fut
        try:
            await in_thread(self._to_client.write, _dump({**req.msg, "id": fresh}))
            reply = await fut
        finally:
            self.forwarded.pop(fresh, None)
        await self._send_agent({**reply, "id": req.rpc_id})

    # ---- the run

    async def _settle_all(self, by: str, *, answer: bool) -> None:
        """Cancel every pending request (bounded); forwarded ones are answered cancelled."""
        budget = self.cfg.shutdown_budget
        reqs = [r for r in self.requests.values() if not r.done]
        for fwd_id, fut in list(self.forwarded.items()):
            if not fut.done():
                fut.set_result({"jsonrpc": "2.0", "id": fwd_id, "result": dict(CANCELLED)})
        if not reqs:
            return
        log.info("cancelling pending requests", count=len(reqs), by=by)
        for r in reqs:
            if r.forwarded:
                continue
            r.cancel(by, budget, answer=answer)
        tasks = [r.task for r in reqs if r.task is not None]
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=budget + 1.5)
            for t in late:
                t.cancel()

    async def _close_agent_stdin(self, wait: float = 2.0) -> None:
        """EOF for the agent. The close waits for a write in progress, so it runs in a thread."""
        if self._to_agent is not None and not self._to_agent.closed:
            await asyncio.wait({in_thread(self._to_agent.close)}, timeout=wait)

    async def _spawn(self) -> tuple[asyncio.subprocess.Process, int, int] | int:
        """Start the agent on two fresh pipes: (process, its stdin's write end, its stdout's read end)."""
        cmd = self.cfg.command
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        try:
            proc = await asyncio.create_subprocess_exec(*cmd, stdin=in_r, stdout=out_w)
        except OSError as e:
            for fd in (in_r, in_w, out_r, out_w):
                os.close(fd)
            if isinstance(e, FileNotFoundError):
                log.error("agent command not found", command=cmd[0])
                return 127
            log.error("cannot start the agent", command=cmd[0], error=str(e))
            return 126
        os.close(in_r)
        os.close(out_w)
        return proc, in_w, out_r

    async def run(self) -> int:
        """Run until the agent exits; its exit code (128+N for a signal)."""
        cfg = self.cfg
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        procs: list[asyncio.subprocess.Process] = []
        signals = 0

        def on_signal(signame: str) -> None:
            nonlocal signals
            signals += 1
            log.info("signal received", signal=signame)
            stop.set()
            if signals > 1 and procs and procs[0].returncode is None:
                procs[0].kill()

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, on_signal, sig.name)
        spawned = await self._spawn()
        if isinstance(spawned, int):
            return spawned
        proc, agent_in, agent_out = spawned
        procs.append(proc)
        log.info(
            "agent started",
            pid=proc.pid,
            command=cfg.command,
            daemon=cfg.url,
            label=cfg.label,
            fallback=cfg.fallback,
            has_token=bool(cfg.token),
        )
        self._to_agent = to_agent = FdSink(agent_in, owned=True)
        self._to_client = to_client = FdSink(cfg.stdout_fd, owned=False)
        big = self._note_oversize
        up = relay_thread(
            "acp-client-to-agent",
            lambda: read_fd(cfg.stdin_fd),
            LineRelay(to_agent, _FromClient(self, loop), on_oversize=big),
            loop,
        )
        down = relay_thread(
            "acp-agent-to-client",
            lambda: read_fd(agent_out),
            LineRelay(to_client, _FromAgent(self, loop), on_oversize=big),
            loop,
            after=lambda: os.close(agent_out),
        )
        stopper = asyncio.ensure_future(stop.wait())
        exited = asyncio.ensure_future(proc.wait())
        waiting: set[asyncio.Future[Any]] = {up, down, stopper, exited}
        grace: float | None = None  # how long the agent may take to exit before it is terminated
        try:
            while True:
                done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                waiting -= done
                if up in done:
                    exc = up.exception()
                    if exc is None:
                        log.info("client closed stdin")
                        await self._settle_all("client", answer=True)
                        await self._close_agent_stdin()
                    elif not isinstance(exc, ConnectionError):
                        log.error("client relay failed", error=repr(exc))
                        await self._close_agent_stdin()
                    # a ConnectionError here: the agent's stdin is gone, it is on its way out
                if down in done:
                    exc = down.exception()
                    if exc is None:
                        # keep going: the client's EOF must still reach the agent, which may wait for it
                        log.info("agent closed stdout")
                        await self._settle_all("agent", answer=False)
                    else:
                        if isinstance(exc, ConnectionError):
                            log.info("client stopped reading; closing the agent's stdin")
                        else:
                            log.error("agent relay failed", error=repr(exc))
                        await self._settle_all("client", answer=True)
                        await self._close_agent_stdin()
                        grace = 5.0
                        break
                if exited in done:
                    if down in waiting:
                        # the agent is gone; let its last output through (a child may hold stdout open)
                        finished, _ = await asyncio.wait({down}, timeout=2.0)
                        waiting -= finished
                        if not finished:
                            log.info("agent exited; its stdout is still open elsewhere, leaving it")
                    await self._settle_all("agent", answer=False)
                    break
                if stopper in done:
                    await self._settle_all("client", answer=True)
                    grace = 0.0
                    break
            rc = await self._wait_agent(proc, stop, grace)
        finally:
            for t in (stopper, exited):
                t.cancel()
            for r in list(self.requests.values()):
                if r.task is not None:
                    r.task.cancel()
            in_thread(to_agent.close)  # not awaited: it may wait on a write that never ends
            to_client.closed = True
            await self.daemon.close()
        log.info("agent exited", code=rc)
        return rc

    async def _wait_agent(self, proc: asyncio.subprocess.Process, stop: asyncio.Event, grace: float | None) -> int:
        """Wait for the agent to exit; after ``grace`` seconds or a stop signal, terminate it (then kill)."""
        waiter = asyncio.ensure_future(proc.wait())
        stopper = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({waiter, stopper}, timeout=grace, return_when=asyncio.FIRST_COMPLETED)
            if not waiter.done():
                await self._close_agent_stdin(0.5)
                with contextlib.suppress(ProcessLookupError):
                    proc.terminate()
                done, _ = await asyncio.wait({waiter}, timeout=3.0)
                if not done:
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
            rc = await waiter
        finally:
            stopper.cancel()
        return 128 - rc if rc < 0 else rc


async def run_proxy(cfg: ProxyConfig) -> int:
    """Run the proxy with ``cfg``; the agent's exit code.

    structlog's default writes to stdout, which belongs to the relay: unless logging is
    configured already, it is sent to stderr here.
    """
    if not structlog.is_configured():
        configure_stderr_logging(secrets=[cfg.token] if cfg.token else ())
    return await Proxy(cfg).run()
