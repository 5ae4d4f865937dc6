"""The bot's own chatter: m.notice messages, threaded under the prompt they concern.

The Matrix façade owns one (``Matrix.notices``) and hands ``post`` to its parts at construction
(trust, undecryptable); the daemon's room-answer handling posts through the same queue.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from bot.matrix.errors import SendFailed
from bot.matrix.txn import txn_id
from bot.util.backoff import NO_JITTER, Backoff

log = structlog.get_logger("notices")


def notice_content(text: str, *, reply_to: str | None, thread_root: str | None) -> dict[str, Any]:
    """An m.notice that mentions no one (``m.mentions: {}``); in the prompt's thread when there is one,
    else a reply."""
    content: dict[str, Any] = {"msgtype": "m.notice", "body": text, "m.mentions": {}}
    if thread_root:
        content["m.relates_to"] = {"rel_type": "m.thread", "event_id": thread_root, "is_falling_back": True,
                                   "m.in_reply_to": {"event_id": reply_to or thread_root}}
    elif reply_to:
        content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
    return content


class Notices:
    """A queue of notices, sent in order, each tried 8 times 0.5 s doubling to 30 s apart (best effort:
    chatter, not state)."""

    def __init__(self, send: Callable[[dict[str, Any], str], Awaitable[str]]) -> None:
        self.send = send  # Matrix.send
        self.queue: asyncio.Queue[tuple[dict[str, Any], str]] = asyncio.Queue(maxsize=1000)

    def post(self, text: str, *, reply_to: str | None = None, thread_root: str | None = None) -> None:
        content = notice_content(text, reply_to=reply_to, thread_root=thread_root)
        txn = txn_id("n", reply_to or "", thread_root or "", text)
        try:
            self.queue.put_nowait((content, txn))
        except asyncio.QueueFull:
            log.warning("notice_dropped", reason="queue full")

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            content, txn = await self.queue.get()
            backoff = Backoff(0.5, 30.0, NO_JITTER)
            for attempt in range(8):
                try:
                    await self.send(content, txn)
                    break
                except SendFailed as e:
                    log.warning("notice_send_failed", error=str(e), attempt=attempt + 1)
                    await asyncio.sleep(backoff.delay())
