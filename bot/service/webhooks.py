"""Outgoing webhooks: each inbox event POSTed as JSON, signed with HMAC-SHA256, retried with back-off
(:mod:`bot.util.backoff`: 0.5 s doubling to 60 s, ±20 %; ``max_attempts`` per hook).

Best effort like the SSE stream: deliveries live in memory; the inbox stays the truth.
Headers: ``X-Permission-Bot-Event`` (the event name) and, with a secret,
``X-Permission-Bot-Signature: sha256=<hex HMAC-SHA256 of the raw body>``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from typing import Any

import aiohttp
import structlog

from bot.config import WebhookConfig
from bot.events.states import Change
from bot.inbox.record import Record
from bot.util.backoff import Backoff

log = structlog.get_logger("webhooks")

MAX_QUEUED = 10_000  # deliveries waiting per hook
MAX_QUEUED_BYTES = 8 * 1024 * 1024  # their bodies, per hook: a dead endpoint cannot pin more memory


def sign(secret: str, body: bytes) -> str:
    """The signature header value for ``body``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class Webhooks:
    """One delivery queue and worker per configured webhook."""

    def __init__(self, hooks: list[WebhookConfig]) -> None:
        self.hooks = hooks
        self.queues: list[asyncio.Queue[tuple[str, bytes]]] = [asyncio.Queue(maxsize=MAX_QUEUED) for _ in hooks]
        self.queued_bytes = [0] * len(hooks)
        self.delivered = 0
        self.failed = 0

    def on_change(self, kind: str, rec: Record) -> None:
        """Inbox listener: queue the event for every hook that wants it."""
        name = Change(kind).event
        if not any(name in hook.events for hook in self.hooks):
            return  # nobody wants it: not even serialized (this runs inside every settlement)
        body = json.dumps({"event": name, "record": rec.to_api()}, separators=(",", ":")).encode()
        for i, (hook, q) in enumerate(zip(self.hooks, self.queues, strict=True)):
            if name not in hook.events:
                continue
            if self.queued_bytes[i] + len(body) > MAX_QUEUED_BYTES or q.full():
                self.failed += 1
                log.warning("webhook_dropped", url=hook.url, reason="queue full", queued_bytes=self.queued_bytes[i])
                continue
            q.put_nowait((name, body))
            self.queued_bytes[i] += len(body)

    async def run(self, stop: asyncio.Event) -> None:
        if not self.hooks:
            return
        log.info("webhooks_started", urls=[h.url for h in self.hooks])
        async with aiohttp.ClientSession() as session:
            workers = [asyncio.create_task(self._worker(session, i)) for i in range(len(self.hooks))]
            try:
                await stop.wait()
            finally:
                for w in workers:
                    w.cancel()
                await asyncio.gather(*workers, return_exceptions=True)

    async def _worker(self, session: aiohttp.ClientSession, i: int) -> None:
        hook, q = self.hooks[i], self.queues[i]
        while True:
            name, body = await q.get()
            self.queued_bytes[i] -= len(body)
            try:
                await self._deliver(session, hook, name, body)
            except asyncio.CancelledError:
                raise
            except Exception:
                self.failed += 1
                log.exception("webhook_worker_error", url=hook.url)

    async def _deliver(self, session: aiohttp.ClientSession, hook: WebhookConfig, name: str, body: bytes) -> None:
        headers = {"Content-Type": "application/json", "X-Permission-Bot-Event": name}
        if hook.secret:
            headers["X-Permission-Bot-Signature"] = sign(hook.secret, body)
        backoff = Backoff(0.5, 60.0)
        for attempt in range(1, hook.max_attempts + 1):
            error: Any = None
            try:
                timeout = aiohttp.ClientTimeout(total=hook.timeout)
                async with session.post(hook.url, data=body, headers=headers, timeout=timeout) as r:
                    if 200 <= r.status < 300:
                        self.delivered += 1
                        break
                    error = f"HTTP {r.status}"
            except (aiohttp.ClientError, TimeoutError) as e:
                error = f"{type(e).__name__}: {e}"
            if attempt == hook.max_attempts:
                self.failed += 1
                log.warning("webhook_failed", url=hook.url, hook_event=name, error=error, attempts=attempt)
                break
            log.info("webhook_retry", url=hook.url, hook_event=name, error=error, retry_in=round(backoff.base, 2))
            await asyncio.sleep(backoff.delay())
