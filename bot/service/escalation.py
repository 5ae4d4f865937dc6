"""Escalation: a prompt nobody answered within ``after`` ([escalation], or its room's) is escalated once.

The people listed are paged: one ``m.text`` mentioning them (bot.room.pages: a message their clients
notify them of under default push rules) names every prompt of the room that is due, and at most one page
goes into a room per ``after`` window, so a flood of requests makes one page, not one each. A page goes
``GRACE`` of ``after`` late, so that a burst of requests is paged together; a prompt that falls due within
a window is paged when it ends (at most ``2 × after`` and the grace after it was requested). The people
mentioned may answer those prompts from then on; each prompt is edited to say it was escalated. A partly
approved quorum prompt is escalated too (it is not settled). The clock is the inbox's: a request's
``requested_at`` and whether it was escalated (``escalated_at``) are kept there, and so is each room's
last page (``kv``: when, which requests, whether all were marked), so a restart or a take-over escalates
what is due, once. The page is recorded, sent, then its requests marked: sent again after a crash in
between, with the page's own txn id, the homeserver answers with the first event. The leader alone runs
it (a task of the Matrix side).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog

from bot.config import Config
from bot.config.escalation import EscalationConfig
from bot.inbox.store import Inbox
from bot.matrix.client import Matrix
from bot.matrix.txn import txn_id
from bot.room.pages import page
from bot.service.tick_loop import tick_loop

log = structlog.get_logger("escalation")
KV = "escalation.page."  # + room name: {"at", "ids", "done"} of the last page sent there
GRACE, GRACE_MAX = 0.25, 60.0  # a page waits this part of ``after`` (at most GRACE_MAX s) past the oldest's due


def grace(after: float) -> float:
    return min(after * GRACE, GRACE_MAX)


class Escalations:
    """Pages what is due in every room that has an escalation."""

    def __init__(self, cfg: Config, inbox: Inbox, matrix: Matrix, now: Callable[[], float]) -> None:
        self.inbox, self.matrix, self.now = inbox, matrix, now
        self.rooms = {name: esc for name in matrix.rooms if (esc := cfg.escalation_of(name)) is not None}
        self.wake = asyncio.Event()

    def on_change(self, kind: str, rec: object) -> None:
        if kind == "request":
            self.wake.set()

    async def tick(self) -> float:
        """Page what is due; the seconds until the next may be."""
        wait = 30.0
        for room, esc in self.rooms.items():
            wait = min(wait, await self._room(room, esc))
        return max(0.2, wait)

    async def _room(self, room: str, esc: EscalationConfig) -> float:
        last: dict[str, Any] = await self.inbox.get_json(KV + room) or {}
        if last.get("ids") and not last.get("done"):  # a page recorded, maybe not sent or not marked
            await self._page(room, esc, last)
        now = self.now()
        opens = float(last.get("at", 0.0)) + esc.after  # the next window
        due = await self.inbox.escalation_due(room, now - esc.after)
        if due and now >= max(opens, min(r.requested_at for r in due) + esc.after + grace(esc.after)):
            last = {"at": now, "ids": [r.id for r in due], "done": False}
            await self.inbox.set_json(KV + room, last)
            await self._page(room, esc, last)
            opens = now + esc.after
        oldest = await self.inbox.next_escalation(room)
        if oldest is None:
            return 30.0
        return max(oldest + esc.after + grace(esc.after), opens) - self.now()

    async def _page(self, room: str, esc: EscalationConfig, last: dict[str, Any]) -> None:
        """Send the page ``last`` records (its txn id is its own), then mark its requests escalated."""
        recs = [r for i in last["ids"] if (r := await self.inbox.get(str(i))) is not None
                and r.pending and r.escalated_at is None and r.prompt_event_id]
        if recs:
            content = page(recs, list(esc.mention), esc.after, self.matrix.rooms[room].room_id)
            await self.matrix.send(content, txn_id("x", self.inbox.install_id, room, repr(last["at"])), room=room)
            marked = [r.id for r in recs if await self.inbox.mark_escalated(r.id, esc.mention, self.now())]
            log.info("requests_escalated", room=room, mention=esc.mention, request_ids=marked)
        await self.inbox.set_json(KV + room, {**last, "done": True})

    async def run(self, stop: asyncio.Event) -> None:
        if not self.rooms:  # nothing to escalate: wait for the stop (a task that ends stops the Matrix side)
            await stop.wait()
            return
        await tick_loop(self.tick, self.wake, stop, "escalation_failed")
