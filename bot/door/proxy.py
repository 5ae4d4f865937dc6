"""What every door's proxy holds and does alike (:class:`DoorProxy`): the run's secret and keys, the daemon,
the sessions it claims and whose rules it ends, and its own lines to either side."""

from __future__ import annotations

import asyncio
import secrets
import uuid
from typing import Any

import structlog

from bot.door.config import ProxyConfig
from bot.door.daemon_client import DaemonClient, DaemonError
from bot.door.ids import line_of
from bot.door.relay import FdSink, in_thread

log = structlog.get_logger("bot.acp")


class DoorProxy:
    """One proxy run's state shared by every door; a door adds its requests and what its filters call."""

    def __init__(self, cfg: ProxyConfig) -> None:
        self.cfg = cfg
        self.proxy_id = secrets.token_hex(16)  # the run's secret (128 bits): the origin of its keys, never shown
        self.fwd_id = uuid.uuid4().hex[:16]  # the run's public name in the ids of forwarded requests
        self.used_keys: dict[str, str] = {}  # session id -> the key of a request of it the daemon took
        self.daemon = DaemonClient(cfg.url, cfg.token)
        self.cwd_by_session: dict[str, str] = {}
        self._n = 0
        self.to_agent: FdSink | None = None
        self.to_client: FdSink | None = None
        self._oversize_noted = False
        self._ending: set[asyncio.Task[None]] = set()
        self._claims: dict[str, asyncio.Task[bool]] = {}  # session id -> its claim in the daemon

    def next_n(self) -> int:
        """The next request number of this run (its key's suffix)."""
        self._n += 1
        return self._n

    # ---- sessions

    def on_session(self, session_id: str) -> asyncio.Task[bool]:
        """A session this run relays: claim it in the daemon now, before the agent can ask anything in it
        (only the claiming run's requests stand in for a hook's); the claim (made once; again after one that
        could not reach it)."""
        task = self._claims.get(session_id)
        if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
            task = self._claims[session_id] = asyncio.ensure_future(self._claim(session_id))
        return task

    async def _claim(self, session_id: str) -> bool:
        try:
            return await self.daemon.claim_session(session_id, f"{self.proxy_id}:0")
        except DaemonError as e:
            log.info("session_claim_failed", session_id=session_id, error=str(e))
            raise

    async def claimed(self, session_id: str, wait: float = 2.0) -> None:
        """Wait (at most ``wait`` seconds) for the session's claim; a failed one is only logged: a request
        is submitted all the same (without a claim, a hook of that session just does not stand down)."""
        task = self.on_session(session_id)
        await asyncio.wait({task}, timeout=wait)
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: logged in _claim

    def on_session_close(self, session_id: str) -> None:
        """The client closed a session: its rules end (in the background; the line is relayed)."""
        if self._n:
            task = asyncio.create_task(self.end_rules(session_id))
            self._ending.add(task)
            task.add_done_callback(self._ending.discard)

    async def end_rules(self, session_id: str | None = None) -> None:
        """Tell the daemon a session (None: every session of this run) ended, so its session rules end.
        The key of a request of that session (any, for all) proves to the daemon that the run is ours."""
        key = self.used_keys.get(session_id) if session_id is not None else next(iter(self.used_keys.values()), None)
        if key is None:
            return  # the daemon took no request (of that session): no rule can exist
        try:
            n = await self.daemon.end_session_rules(key, session_id)
        except DaemonError as e:
            log.warning("session_rules_end_failed", error=str(e))
            return
        if n:
            log.info("session_rules_ended", session_id=session_id, count=n)

    def note_oversize(self, size: int) -> None:
        """A relay's line too long to inspect: said once a run."""
        if not self._oversize_noted:
            self._oversize_noted = True
            log.warning("oversize_line_relayed_uninspected", bytes=size)

    # ---- writing our own lines

    async def answer(self, rpc_id: Any, result: dict[str, Any]) -> None:
        """Send the agent a JSON-RPC result for one of its requests."""
        await self.send_agent({"jsonrpc": "2.0", "id": rpc_id, "result": result})

    async def send_agent(self, msg: dict[str, Any]) -> None:
        """Write one JSON-RPC message to the agent (nothing when it is gone)."""
        if self.to_agent is None:
            return
        try:
            line = line_of(msg)
            if not self.to_agent.try_write(line):  # a short answer goes at once, not through a thread
                await in_thread(self.to_agent.write, line)
        except OSError as e:
            log.info("agent_write_failed", error=str(e) or type(e).__name__)

    def relay_to_client(self, data: bytes) -> None:
        """Write a line of our own to the client, from the relay thread (the sink keeps writes whole)."""
        if self.to_client is not None:
            self.to_client.write(data)

    # ---- the end of the run (:mod:`bot.door.run`)

    async def settle_all(self, by: str, *, answer: bool) -> None:
        """Settle every pending request (the door's own): cancelled ``by`` the side that went."""
        raise NotImplementedError

    async def finish(self) -> None:
        """After the run: the door stops its tasks, then :meth:`close_door`."""
        raise NotImplementedError

    async def close_agent_stdin(self, wait: float = 2.0) -> None:
        """EOF for the agent. The close waits for a write in progress, so it runs in a thread."""
        if self.to_agent is not None and not self.to_agent.closed:
            await asyncio.wait({in_thread(self.to_agent.close)}, timeout=wait)

    async def close_door(self) -> None:
        """After the run (a door's ``finish``, its own tasks stopped): close both sinks, end the run's
        session rules (bounded)."""
        if self.to_agent is not None:
            in_thread(self.to_agent.close)  # not awaited: it may wait on a write that never ends
        if self.to_client is not None:
            self.to_client.closed = True
        for task in self._claims.values():
            task.cancel()
        await asyncio.wait({asyncio.ensure_future(self.end_rules()), *self._ending}, timeout=3.0)
        await self.daemon.close()
