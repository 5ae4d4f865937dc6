"""Where a request's time goes: stamps along its way, logged once as ``request_timing``.

The daemon stamps each request when it is submitted, when its prompt is sent and
when posted, when the answer that settled it was sent (its ``origin_server_ts``)
and seen in sync, when it settled and when the settled edit was sent; the last
stamp logs one ``request_timing`` event with the time between each pair, in
milliseconds (``bench/latency.py`` reads them). Bounded; the proxy logs its own
``request_timing`` (settled -> proxy told -> agent told, bot/acp/request.py).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from bot.inbox.record import Record

log = structlog.get_logger("timing")

# (field, from stage, to stage): the intervals a ``request_timing`` event carries
INTERVALS = (
    ("submit_to_post_ms", "submitted", "posted"),
    ("submit_to_send_ms", "submitted", "sending"),  # of which the bot's own part (stored, picked up, built)
    ("send_to_post_ms", "sending", "posted"),  # and the homeserver's (the send request)
    ("post_to_answer_ms", "posted", "answer_sent"),
    ("answer_to_seen_ms", "answer_sent", "seen"),
    ("seen_to_settled_ms", "seen", "settled"),
    ("settled_to_edit_ms", "settled", "edited"),
    ("submit_to_settled_ms", "submitted", "settled"),
)
MAX_TRACKED = 20_000  # requests whose stamps are kept at once; the oldest are dropped beyond it


def intervals(stamps: dict[str, float]) -> dict[str, float]:
    """The INTERVALS both of whose stamps are known, in ms (one decimal)."""
    return {name: round((stamps[b] - stamps[a]) * 1000, 1) for name, a, b in INTERVALS if a in stamps and b in stamps}


class Timings:
    """Stamps per request id (seconds, wall clock), logged when the prompt's settled edit is sent."""

    def __init__(self, max_tracked: int = MAX_TRACKED) -> None:
        self._stamps: OrderedDict[str, dict[str, float]] = OrderedDict()
        self._max = max_tracked
        self._event: tuple[float, float | None] | None = None  # the room event being handled: seen, sent

    def mark(self, request_id: str, stage: str, at: float) -> None:
        stamps = self._stamps.get(request_id)
        if stamps is None:
            stamps = self._stamps[request_id] = {}
            while len(self._stamps) > self._max:
                self._stamps.popitem(last=False)
        stamps.setdefault(stage, at)

    def on_change(self, kind: str, rec: Record) -> None:
        """Inbox listener: submitted, and settled (by the room event being handled, if any)."""
        if kind == "request":
            self.mark(rec.id, "submitted", rec.requested_at)
        elif kind == "resolved" and rec.outcome is not None:
            if self._event is not None and rec.id in self._stamps:
                seen, sent = self._event
                self.mark(rec.id, "seen", seen)
                if sent is not None:
                    self.mark(rec.id, "answer_sent", sent)
            self.mark(rec.id, "settled", rec.outcome.decided_at)

    def room_handler(
        self, handler: Callable[[dict[str, Any]], Awaitable[None]], now: Callable[[], float]
    ) -> Callable[[dict[str, Any]], Awaitable[None]]:
        """``handler`` with the time each event was seen (and sent) known to ``on_change`` while it runs."""

        async def timed(source: dict[str, Any]) -> None:
            ts = source.get("origin_server_ts")
            self._event = (now(), ts / 1000 if isinstance(ts, int | float) else None)
            try:
                await handler(source)
            finally:
                self._event = None

        return timed

    def edited(self, request_id: str, at: float, **fields: Any) -> None:
        """The settled edit was sent: log the request's ``request_timing`` and forget it."""
        stamps = self._stamps.pop(request_id, None)
        if stamps is None:
            return
        stamps["edited"] = at
        log.info("request_timing", request_id=request_id, **intervals(stamps), **fields)
