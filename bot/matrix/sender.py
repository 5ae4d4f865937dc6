"""Sending into the station room: messages, reactions, redactions and state events, with deterministic txn ids.

Into an encrypted room an event is encrypted (reactions too) for the devices the trust policy
allows. Sends wait for the first sync, which tells whether the room is encrypted, and their turn under the
homeserver's message limit (bot/matrix/gate.py: nio leaves the 429s to this module). What failed last is
kept (``send_failing``, for /healthz) with a count (``send_errors``, for /metrics). A ``guard`` (the
leader's fence, bot.service.leadership) may refuse every send of a daemon whose term is over.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from nio import ErrorResponse, RoomPutStateResponse, RoomSendResponse

from bot.matrix.e2ee import E2EE
from bot.matrix.errors import SendFailed
from bot.matrix.gate import RateGate
from bot.matrix.rate import BACKGROUND, OPTIONAL
from bot.matrix.refusal import Refusal
from bot.matrix.retry import LIMITED, describe, retry_after
from bot.matrix.station import Station

FIRST_SYNC_WAIT = 60.0  # sends wait this long for the first sync (room state, encryption) before failing
MAX_REFUSALS = 20  # refusals for rate of one send, each waited out, before it fails (and its caller backs off)


class Sender:
    """Sends and redactions into the station room; SendFailed when the homeserver does not take one."""

    def __init__(self, st: Station, e2ee: E2EE, refusal: Refusal, synced: asyncio.Event, gate: RateGate) -> None:
        self.st = st
        self.gate = gate  # the account's one: the homeserver limits the account, not a room
        self.e2ee = e2ee
        self.refusal = refusal
        self.synced = synced
        self.send_errors = 0
        self.send_failing: str | None = None  # why the last send failed, until one succeeds
        self.guard: Callable[[], Awaitable[None]] | None = None  # raises when this daemon may no longer send

    async def send(
        self, content: dict[str, Any], txn: str, event_type: str = "m.room.message", *,
        kind: str = BACKGROUND, order: float | None = None,
    ) -> str:
        """Send into the station room with ``txn``; returns the event id or raises SendFailed. ``kind`` and
        ``order`` (its request's arrival) place it among the sends waiting while the homeserver limits the
        bot (bot/matrix/gate.py); a refusal for rate sends it again in its place, except an OPTIONAL one: that
        is left out (SendFailed, ``rate_limited``) whenever it would have to wait."""

        async def go() -> Any:
            if self.e2ee.encrypting():
                return await self.e2ee.send(event_type, content, txn)
            return await self.st.client.room_send(self.st.room_id, event_type, content, tx_id=txn)

        return await self._sent(go, RoomSendResponse, kind, order)

    async def put_state(self, event_type: str, content: dict[str, Any], state_key: str = "") -> str:
        """Set a state event (never encrypted; setting the same content again makes no new event); its event
        id, or SendFailed (``code`` ``M_FORBIDDEN``: the bot lacks the power for it). Background work under the
        homeserver's limit."""
        return await self._sent(
            lambda: self.st.client.room_put_state(self.st.room_id, event_type, content, state_key=state_key),
            RoomPutStateResponse, BACKGROUND, None,
        )

    async def _sent(
        self, go: Callable[[], Awaitable[Any]], ok: type[RoomSendResponse] | type[RoomPutStateResponse],
        kind: str, order: float | None,
    ) -> str:
        """Run one send in its turn, again after a refusal for rate; the event id of an ``ok`` response, else
        SendFailed."""
        if self.guard is not None:
            await self.guard()  # not a SendFailed: a deposed leader's send is refused, not retried
        refused = 0
        while True:
            if kind == OPTIONAL and not self.gate.spare():
                raise SendFailed("left out: the homeserver rate-limits the bot", LIMITED[0])
            r = await self._send_once(go, kind, order)
            wait = retry_after(r)
            if wait is None:
                break
            refused += 1
            self.gate.refused(wait)
            if refused > MAX_REFUSALS:  # the homeserver's limit is not the one counted: the caller backs off
                break
        if isinstance(r, ok):
            self.send_failing = None
            return str(r.event_id)
        code = str(getattr(r, "status_code", "") or "")
        why = f"{code}: {getattr(r, 'message', r)}"
        self._failed(why)
        raise SendFailed(why, code)

    async def _send_once(self, go: Callable[[], Awaitable[Any]], kind: str, order: float | None) -> Any:
        try:
            if not self.synced.is_set():
                try:
                    await asyncio.wait_for(self.synced.wait(), FIRST_SYNC_WAIT)
                except TimeoutError:
                    raise SendFailed("no sync with the homeserver yet") from None
            if self.refusal.refused:
                raise SendFailed(
                    "the station room is encrypted and [matrix] encryption = false: the bot posts nothing there"
                )
            await self.gate.turn(kind, order)
            return await go()
        except SendFailed as e:
            self._failed(str(e))
            raise
        except Exception as e:
            self._failed(describe(e))
            raise SendFailed(describe(e)) from None

    def _failed(self, why: str) -> None:
        self.send_errors += 1
        self.send_failing = why

    async def redact(self, event_id: str, txn: str, reason: str | None = None) -> None:
        """Redact one of the bot's own events in the station room (redactions are never encrypted); background
        work under the homeserver's limit."""
        if self.guard is not None:
            await self.guard()
        for _ in range(MAX_REFUSALS + 1):
            try:
                await self.gate.turn(BACKGROUND)
                r = await self.st.client.room_redact(self.st.room_id, event_id, reason=reason, tx_id=txn)
            except Exception as e:
                self.send_errors += 1
                raise SendFailed(f"{type(e).__name__}: {e}") from None
            wait = retry_after(r)
            if wait is None:
                break
            self.gate.refused(wait)
        if isinstance(r, ErrorResponse):
            self.send_errors += 1
            raise SendFailed(f"{r.status_code}: {r.message}")
