"""HTTP to the permission-bot daemon (aiohttp): submit, long-poll, decide, with back-off.

Single calls raise :class:`DaemonUnavailable` for what a retry may cure (no connection, a timeout, 5xx, 429) and
:class:`DaemonRefused` for what it will not (other 4xx). The ``*_retrying`` helpers retry the former with exponential
back-off capped at 2 s (:class:`DaemonBackoff`, the proxy's numbers for :mod:`bot.util.backoff`).

Every record handed back is checked to be the one sent: its ``digest`` must be that of the params submitted
(:class:`WrongRecord` otherwise, a refusal: the caller fails closed and never relays it).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
import structlog
import yarl

from bot.util.backoff import Backoff
from bot.util.digest import submission_digest
from bot.util.ids import url_segment

log = structlog.get_logger("bot.acp.daemon")
T = TypeVar("T")


class DaemonError(Exception):
    """A call to the daemon that did not give a usable answer."""


class DaemonUnavailable(DaemonError):
    """No answer, or one a retry may cure (5xx, 429).

    ``delivered`` is False only when the call surely never reached the daemon's handler (no
    connection, 429 or 503: refused at the door or nothing stored), so a POST may have been acted on.
    """

    def __init__(self, message: str, *, delivered: bool = True) -> None:
        super().__init__(message)
        self.delivered = delivered


class DaemonRefused(DaemonError):
    """A definite refusal (4xx): retrying the same call will not help."""

    def __init__(self, status: int, body: Any) -> None:
        reason = body.get("reason") or body.get("error") if isinstance(body, dict) else body
        super().__init__(f"HTTP {status}: {reason}")
        self.status = status
        self.body = body


class WrongRecord(DaemonRefused):
    """The daemon answered with a record that is not the request sent (its digest differs)."""

    def __init__(self) -> None:
        super().__init__(200, {"error": "wrong_record", "reason": "the record's digest is not the request's"})


def _found(status: int, rec: Any, digest: str | None) -> dict[str, Any] | None:
    """A record route's answer: the record (:func:`_checked`), None for a 404, else :class:`DaemonRefused`."""
    if status == 404:
        return None
    if status == 200 and isinstance(rec, dict):
        return _checked(rec, digest)
    raise DaemonRefused(status, rec)


def _checked(rec: dict[str, Any], digest: str | None) -> dict[str, Any]:
    """``rec`` when it carries ``digest`` (always, when ``digest`` is None), else :class:`WrongRecord`."""
    if digest is not None and rec.get("digest") != digest:
        log.warning("daemon_record_mismatch", request_id=str(rec.get("id"))[:200])
        raise WrongRecord()
    return rec


class DaemonBackoff(Backoff):
    """The proxy's pace with the daemon: ``first`` (0.1 s) doubling up to ``cap`` (2 s), each pause 80-100 %."""

    def __init__(self, first: float = 0.1, cap: float = 2.0) -> None:
        super().__init__(first, cap, jitter=(0.8, 1.0))


@dataclass
class SubmitState:
    """Whether a submission may have reached the daemon without its answer reaching the proxy."""

    running: bool = False  # an attempt is on its way (cancelled mid-way, it stays so)
    lost: bool = False  # an attempt failed after it may have been delivered

    @property
    def in_doubt(self) -> bool:
        return self.running or self.lost


class DaemonClient:
    """The daemon's permission routes, one call per method; see the module docstring."""

    def __init__(self, url: str, token: str | None, *, call_timeout: float = 15.0) -> None:
        self.url = url.rstrip("/")
        self._base = yarl.URL(self.url)
        self._token = token
        self._call_timeout = call_timeout
        self._session: aiohttp.ClientSession | None = None
        self._down_since: float | None = None
        self._last_warning = 0.0

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            headers = {"Accept": "application/json"}
            if self._token:
                headers["Authorization"] = f"Bearer {self._token}"
            connector = aiohttp.TCPConnector(limit=0)  # keep-alive: one connection serves many calls
            self._session = aiohttp.ClientSession(headers=headers, connector=connector, trust_env=False)
        return self._session

    async def close(self) -> None:
        """Close the connection pool."""
        if self._session is not None and not self._session.closed:
            await self._session.close()

    async def _call(
        self, method: str, url: yarl.URL, body: Any = None, *, timeout: float | None = None
    ) -> tuple[int, Any]:
        t = aiohttp.ClientTimeout(total=timeout or self._call_timeout, sock_connect=min(5.0, timeout or 5.0))
        data = None if body is None else json.dumps(body, ensure_ascii=False).encode()
        headers = {"Content-Type": "application/json"} if data is not None else None
        try:
            async with self._http().request(method, url, data=data, headers=headers, timeout=t) as r:
                raw = await r.read()
                status = r.status
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            self._note_down(e)
            never_sent = isinstance(e, aiohttp.ClientConnectorError)
            raise DaemonUnavailable(f"{type(e).__name__}: {e}".rstrip(": "), delivered=not never_sent) from None
        try:
            parsed: Any = json.loads(raw) if raw.strip() else None
        except ValueError:
            parsed = raw.decode(errors="replace")[:200]
        if status >= 500 or status == 429:
            self._note_down(f"HTTP {status}")
            raise DaemonUnavailable(f"HTTP {status}", delivered=status not in (429, 503))
        self._note_up()
        return status, parsed

    def _note_down(self, why: object) -> None:
        now = time.monotonic()
        if self._down_since is None:
            self._down_since = now
        if now - self._last_warning >= 10.0:
            self._last_warning = now
            log.warning("daemon_unreachable_retrying", url=self.url, error=str(why) or type(why).__name__)

    def _note_up(self) -> None:
        if self._down_since is not None:
            down = round(time.monotonic() - self._down_since, 2)
            log.info("daemon_reachable_again", url=self.url, down_seconds=down)
            self._down_since = None
            self._last_warning = 0.0

    def _one(self, request_id: str) -> yarl.URL:
        return self._base.joinpath("permissions", url_segment(request_id), encoded=True)

    async def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /permissions``: the record (new or, for a known key, the existing one), checked to be
        this body's (:class:`WrongRecord`); a 409 ``key_conflict`` is a :class:`DaemonRefused`."""
        status, rec = await self._call("POST", self._base / "permissions", body)
        if status in (200, 201) and isinstance(rec, dict) and isinstance(rec.get("id"), str):
            return _checked(rec, submission_digest(body) or "")
        if status == 409 and isinstance(rec, dict) and rec.get("error") == "key_conflict":
            log.warning("daemon_key_conflict", reason=str(rec.get("reason"))[:200])
        raise DaemonRefused(status, rec)

    async def get(self, request_id: str, wait: float = 0.0, digest: str | None = None) -> dict[str, Any] | None:
        """``GET /permissions/{id}[?wait=N]``: the record (checked to carry ``digest`` when given), or None
        when the daemon does not know it."""
        url = self._one(request_id)
        if wait > 0:
            url = url.with_query(wait=str(int(wait)))
        return _found(*await self._call("GET", url, timeout=wait + self._call_timeout), digest)

    async def decide(self, request_id: str, body: dict[str, Any], digest: str | None = None) -> dict[str, Any] | None:
        """``POST /permissions/{id}``: the settled record (checked to carry ``digest`` when given), or None
        when unknown or already settled."""
        return _found(*await self._call("POST", self._one(request_id), body), digest)

    async def end_session_rules(self, key: str, session_id: str | None = None) -> int:
        """``POST /rules/end``: the session (or every session of the proxy run behind ``key``, the key of a
        request it submitted, of that session when one is named) ended; 0 when the daemon has no such request."""
        body: dict[str, Any] = {"key": key} if session_id is None else {"key": key, "sessionId": session_id}
        status, out = await self._call("POST", self._base / "rules" / "end", body, timeout=2.5)
        if status == 200 and isinstance(out, dict) and isinstance(out.get("ended"), int):
            return int(out["ended"])
        if status == 404:
            return 0
        raise DaemonRefused(status, out)

    async def claim_session(self, session_id: str, key: str) -> bool:
        """``POST /sessions/claim``: this run relays ``session_id`` (``key``: of the run's form, ``PROXYID:0``);
        False when the daemon refuses the claim (another run's session, or a hook asked in it first)."""
        body = {"sessionId": session_id, "key": key}
        status, out = await self._call("POST", self._base / "sessions" / "claim", body, timeout=2.5)
        if status == 200:
            return True
        if status in (404, 409, 422):  # 404: a daemon older than claims
            log.warning("daemon_claim_refused", status=status, reason=str(
                out.get("reason") if isinstance(out, dict) else out)[:200])
            return False
        raise DaemonRefused(status, out)

    async def submit_retrying(
        self, body: dict[str, Any], deadline: float | None = None, state: SubmitState | None = None
    ) -> dict[str, Any]:
        """Submit until it works; past ``deadline`` (loop time) re-raise :class:`DaemonUnavailable`.

        ``state`` is kept up to date: whether the daemon may hold the request unbeknown to the proxy."""
        st = state or SubmitState()

        async def attempt() -> dict[str, Any]:
            st.running = True
            try:
                rec = await self.submit(body)
            except DaemonError as e:
                st.running = False
                st.lost = st.lost or (isinstance(e, DaemonUnavailable) and e.delivered)
                raise
            st.running = st.lost = False
            return rec

        return await retrying(attempt, DaemonBackoff(), deadline)

    async def cancel_retrying(
        self, request_id: str, by: str, budget: float, *, key: str, digest: str | None, feedback: str | None = None
    ) -> dict[str, Any] | None:
        """Cancel one request, retrying for up to ``budget`` seconds; the record, or None (unknown or settled).

        ``key`` (the one it was submitted with) proves to the daemon that the request is this run's."""
        body = {"decision": "cancel", "by": by, "key": key} | ({"feedback": feedback} if feedback else {})
        deadline = asyncio.get_running_loop().time() + budget
        return await retrying(lambda: self.decide(request_id, body, digest), DaemonBackoff(cap=0.5), deadline)


async def retrying(call: Callable[[], Awaitable[T]], backoff: Backoff, deadline: float | None = None) -> T:
    """``call()`` again after each :class:`DaemonUnavailable`, paced by ``backoff``; past ``deadline`` (loop
    time) that error is re-raised. Any other error ends it at once."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            return await call()
        except DaemonUnavailable:
            pause = backoff.delay()
            if deadline is not None:
                left = deadline - loop.time()
                if left <= 0:
                    raise
                pause = min(pause, left)
            await asyncio.sleep(pause)
