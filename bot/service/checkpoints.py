"""The ledger's head posted into each station room (docs/audit.md).

A state event of type ``dev.permission-bot.ledger.checkpoint`` (state key ``""``, content ``{"seq": N, "hash":
H}``): clients show no message for it and it is never encrypted, yet the room's history keeps every one. Within
``delay`` (60 s) of an entry when none was posted in that room in the last ``period`` (10 minutes), else when
those minutes end. A state event needs the power the room's ``state_default`` (50 by default) or its own
level asks; a bot refused it (``M_FORBIDDEN``) posts the checkpoint as the older builds did, an ``m.notice``
carrying ``{"dev.permission-bot.ledger.checkpoint": {...}}`` (shown as a message, encrypted in an encrypted
room: verify cannot read it there), and says so in a warning (``ledger_checkpoint_as_notice``) with the fix.
The leader alone runs it (a task of the Matrix side); what each room was last sent is kept in the inbox
(``kv``), so a restart or a take-over goes on from there. The homeserver then holds copies of the head
that whoever can edit the database cannot rewrite: ``audit verify --against-room``.

``PERMISSION_BOT_CHECKPOINT_PERIOD`` and ``PERMISSION_BOT_CHECKPOINT_DELAY`` (seconds) change the two
intervals, for tests and benches (not a config key: the contract fixes them).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from bot.events.checkpoints import CHECKPOINT_TYPE, state_content
from bot.events.ledger import CHECKPOINT_KEY
from bot.inbox import ledger
from bot.inbox.store import Inbox
from bot.matrix.client import Matrix, SendFailed
from bot.matrix.txn import txn_id
from bot.service.tick_loop import tick_loop

log = structlog.get_logger("checkpoints")
KV = "ledger.checkpoint."  # + room name: {"seq", "at"} of the last checkpoint sent there
PERIOD, DELAY = 600.0, 60.0


def intervals(env: Mapping[str, str]) -> tuple[float, float]:
    """(period, delay) from the environment (the defaults when unset or not a positive number)."""

    def num(key: str, default: float) -> float:
        try:
            v = float(env.get(key, ""))
        except ValueError:
            return default
        return v if v > 0 else default

    return num("PERMISSION_BOT_CHECKPOINT_PERIOD", PERIOD), num("PERMISSION_BOT_CHECKPOINT_DELAY", DELAY)


def due(last_at: float, first_new_at: float, period: float, delay: float) -> float:
    """When a room's next checkpoint is due: half ``delay`` after its first entry not yet posted (entries
    settled together share one checkpoint), but not before ``period`` after the last one there (pure)."""
    return max(first_new_at + delay / 2, last_at + period if last_at else 0.0)


FIX = (f"give the bot the power to send {CHECKPOINT_TYPE} state events: raise its power level to the room's "
       f"state_default (50 by default), or set events.{CHECKPOINT_TYPE} in the room's power levels to its level")


def content(seq: int, h: str) -> dict[str, Any]:
    """The older builds' checkpoint: an ``m.notice`` (what a bot without the power for the state event posts)."""
    return {
        "msgtype": "m.notice",
        "body": f"Ledger checkpoint: entry {seq}, hash {h}",
        "m.mentions": {},
        CHECKPOINT_KEY: {"seq": seq, "hash": h},
    }


class Checkpoints:
    """Posts the head into every station room when due."""

    def __init__(self, inbox: Inbox, matrix: Matrix, now: Callable[[], float]) -> None:
        self.inbox, self.matrix, self.now = inbox, matrix, now
        self.period, self.delay = intervals(os.environ)
        self.wake = asyncio.Event()
        self.warned: set[str] = set()  # rooms whose refusal of the state event was logged as a warning

    def on_change(self, kind: str, rec: object) -> None:
        if kind in ("resolved", "amended"):
            self.wake.set()

    async def tick(self) -> float:
        """Post where due; the seconds until the next look."""
        seq, h = await ledger.head(self.inbox.database)
        wait = self.period
        for name in self.matrix.rooms:
            last = await self.inbox.get_json(KV + name) or {}
            last_seq, last_at = int(last.get("seq", 0)), float(last.get("at", 0.0))
            if seq <= last_seq:
                continue
            first = await ledger.at_of(self.inbox.database, last_seq + 1) or self.now()
            when, now = due(last_at, first, self.period, self.delay), self.now()
            if now < when:
                wait = min(wait, when - now)
                continue
            await self._post(name, seq, h)
            await self.inbox.set_json(KV + name, {"seq": seq, "at": now})
            log.info("ledger_checkpoint_posted", room=name, seq=seq)
        return max(0.05, wait)

    async def _post(self, room: str, seq: int, h: str) -> None:
        """The state event; the older builds' notice when the room refuses the bot that."""
        try:
            await self.matrix.put_state(CHECKPOINT_TYPE, state_content(seq, h), room=room)
            return
        except SendFailed as e:
            if e.code != "M_FORBIDDEN":
                raise
            (log.info if room in self.warned else log.warning)(
                "ledger_checkpoint_as_notice", room=room, seq=seq, error=str(e)[:200], fix=FIX)
            self.warned.add(room)
        await self.matrix.send(content(seq, h), txn_id("cp", room, str(seq), h), room=room)

    async def run(self, stop: asyncio.Event) -> None:
        await tick_loop(self.tick, self.wake, stop, "ledger_checkpoint_failed")
