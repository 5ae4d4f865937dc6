"""Outgoing webhooks: each inbox event POSTed as JSON, signed with HMAC-SHA256, retried with back-off
(:mod:`bot.util.backoff`: 0.5 s doubling to 60 s, ±20 %; ``max_attempts`` per hook).

Best effort like the SSE stream: deliveries live in memory; the inbox stays the truth.
Headers (docs/webhooks.md): ``X-Permission-Bot-Event`` (the event name), ``X-Permission-Bot-Delivery`` (an
id, the same on each attempt of one delivery), ``X-Permission-Bot-Timestamp`` (Unix seconds of this attempt)
and, with a secret, ``X-Permission-Bot-Signature: sha256=<hex HMAC-SHA256 of "{timestamp}.{delivery}.{body}">``:
a receiver that checks the signature and the timestamp's age refuses a replayed delivery.
Redirects are never followed (a 3xx is a failed attempt: the signed body goes only to ``url``), and the URL's
own credentials (``user:pw@``, query values) never reach a log line (:mod:`bot.util.urlsecrets`).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import secrets
import time
from typing import Any

import aiohttp
import structlog

from bot.config import WebhookConfig
from bot.events.states import Change
from bot.inbox.record import Record
from bot.util.backoff import Backoff
from bot.util.urlsecrets import shown_url, url_secrets

log = structlog.get_logger("webhooks")

MAX_QUEUED = 10_000  # deliveries waiting per hook
MAX_QUEUED_BYTES = 8 * 1024 * 1024  # their bodies, per hook: a dead endpoint cannot pin more memory


def headers(name: str, delivery: str, timestamp: int, secret: str | None, body: bytes) -> dict[str, str]:
    """The headers of one attempt of one delivery; with a ``secret``, its signature: HMAC-SHA256 of
    ``"{timestamp}.{delivery}."`` followed by the raw body."""
    out = {
        "Content-Type": "application/json",
        "X-Permission-Bot-Event": name,
        "X-Permission-Bot-Delivery": delivery,
        "X-Permission-Bot-Timestamp": str(timestamp),
    }
    if secret:
        signed = f"{timestamp}.{delivery}.".encode() + body
        out["X-Permission-Bot-Signature"] = "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return out


class Webhooks:
    """One delivery queue and worker per configured webhook."""

    def __init__(self, hooks: list[WebhookConfig]) -> None:
        self.hooks = hooks
        self.shown = [shown_url(str(h.url)) for h in hooks]  # what a log line says of each URL
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
                log.warning(
                    "webhook_dropped", url=self.shown[i], reason="queue full", queued_bytes=self.queued_bytes[i]
                )
                continue
            q.put_nowait((name, body))
            self.queued_bytes[i] += len(body)

    async def run(self, stop: asyncio.Event) -> None:
        if not self.hooks:
            return
        log.info("webhooks_started", urls=self.shown)
        async with aiohttp.ClientSession() as session:
            workers = [asyncio.create_task(self._worker(session, i)) for i in range(len(self.hooks))]
            try:
                await stop.wait()
            finally:
                for w in workers:
                    w.cancel()
                await asyncio.gather(*workers, return_exceptions=True)

    async def _worker(self, session: aiohttp.ClientSession, i: int) -> None:
        q = self.queues[i]
        while True:
            name, body = await q.get()
            self.queued_bytes[i] -= len(body)
            try:
                await self._deliver(session, i, name, body)
            except Exception:  # a cancel is no Exception: it ends the worker
                self.failed += 1
                log.exception("webhook_worker_error", url=self.shown[i])

    def _scrub(self, i: int, text: str) -> str:
        """``text`` with hook ``i``'s URL shown masked and its credentials cut out."""
        text = text.replace(str(self.hooks[i].url), self.shown[i])
        for secret in url_secrets(str(self.hooks[i].url)):
            text = text.replace(secret, "***")
        return text

    async def _deliver(self, session: aiohttp.ClientSession, i: int, name: str, body: bytes) -> None:
        hook, shown = self.hooks[i], self.shown[i]
        delivery = secrets.token_hex(16)
        backoff = Backoff(0.5, 60.0)
        for attempt in range(1, hook.max_attempts + 1):
            error: Any = None
            sent = headers(name, delivery, int(time.time()), hook.secret, body)  # signed afresh each attempt
            try:
                timeout = aiohttp.ClientTimeout(total=hook.timeout)
                async with session.post(
                    str(hook.url), data=body, headers=sent, timeout=timeout, allow_redirects=False
                ) as r:
                    if 200 <= r.status < 300:
                        self.delivered += 1
                        break
                    error = f"HTTP {r.status}" + (" (redirects are not followed)" if 300 <= r.status < 400 else "")
            except (aiohttp.ClientError, TimeoutError) as e:
                error = self._scrub(i, f"{type(e).__name__}: {e}")  # its text may quote the URL
            if attempt == hook.max_attempts:
                self.failed += 1
                log.warning("webhook_failed", url=shown, hook_event=name, delivery=delivery, error=error,
                            attempts=attempt)
                break
            log.info("webhook_retry", url=shown, hook_event=name, delivery=delivery, error=error,
                     retry_in=round(backoff.base, 2))
            await asyncio.sleep(backoff.delay())
