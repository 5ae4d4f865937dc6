"""Escalation: a prompt nobody answered within ``after`` ([escalation], or its room's) is escalated once.

A notice replying to the prompt mentions (``m.mentions``) the people listed, who may answer that prompt
from then on; the prompt is edited to say it was escalated. A partly approved quorum prompt is escalated
too (it is not settled). The clock is the inbox's: a request's ``requested_at`` and whether it was
escalated (``escalated_at``) are kept there, so a restart or a take-over escalates what is due, once. The
leader alone runs it (a task of the Matrix side). The notice is sent before the mark, with a txn id of the
request's own: sent again after a crash in between, the homeserver answers with the first event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog

from bot.config import Config
from bot.config.escalation import EscalationConfig
from bot.inbox.record import Record
from bot.inbox.store import Inbox
from bot.matrix.client import Matrix
from bot.matrix.txn import txn_id
from bot.service.ticking import tick_loop
from bot.util.durations import format_age

log = structlog.get_logger("escalation")


def notice(rec: Record, esc: EscalationConfig) -> dict[str, Any]:
    """The escalation notice: a reply to ``rec``'s prompt mentioning ``esc.mention``."""
    assert rec.prompt_event_id
    who = ", ".join(esc.mention)
    text = (f"{who}: this permission request has waited {format_age(esc.after)} without an answer. "
            "You may answer it now: reply to the prompt.")
    return {"msgtype": "m.notice", "body": text, "m.mentions": {"user_ids": list(esc.mention)},
            "m.relates_to": {"m.in_reply_to": {"event_id": rec.prompt_event_id}}}


class Escalations:
    """Escalates what is due in every room that has an escalation."""

    def __init__(self, cfg: Config, inbox: Inbox, matrix: Matrix, now: Callable[[], float]) -> None:
        self.inbox, self.matrix, self.now = inbox, matrix, now
        self.rooms = {name: esc for name in matrix.rooms if (esc := cfg.escalation_of(name)) is not None}
        self.wake = asyncio.Event()

    def on_change(self, kind: str, rec: object) -> None:
        if kind == "request":
            self.wake.set()

    async def tick(self) -> float:
        """Escalate what is due; the seconds until the next may be."""
        wait = 30.0
        for room, esc in self.rooms.items():
            for rec in await self.inbox.escalation_due(room, self.now() - esc.after):
                await self.matrix.send(notice(rec, esc), txn_id("x", self.inbox.install_id, rec.id), room=room)
                if await self.inbox.mark_escalated(rec.id, esc.mention, self.now()):
                    log.info("request_escalated", request_id=rec.id, room=room, mention=esc.mention)
            oldest = await self.inbox.next_escalation(room)
            if oldest is not None:
                wait = min(wait, max(0.2, oldest + esc.after - self.now()))
        return wait

    async def run(self, stop: asyncio.Event) -> None:
        if not self.rooms:  # nothing to escalate: wait for the stop (a task that ends stops the Matrix side)
            await stop.wait()
            return
        await tick_loop(self.tick, self.wake, stop, "escalation_failed")
