"""When the room is quiet enough for the bot's background events (keycap reactions and their clean-up).

A person waits for two things: a prompt to appear and their answer to reach the
agent. Each is one event the homeserver persists and fans out to every client in
the room; any event the bot sends at the same moment is persisted in between and
makes that round slower. So background events wait for a quiet room: no prompt
being posted, no prompt posted in the last ``ANSWER_WAIT`` seconds still pending
(a quick answer may be on its way), and ``AGAIN_WAIT`` since the last settlement
(an agent often asks again at once). Pure: ``now`` is passed in.
"""

from __future__ import annotations

ANSWER_WAIT = 1.0  # seconds a freshly posted prompt keeps the room busy while it is pending
AGAIN_WAIT = 0.1  # seconds after a settlement the room stays busy: the agent may ask again at once


class Quiet:
    """What the room is busy with, by the outbox's clock."""

    def __init__(self) -> None:
        self._fresh: dict[str, float] = {}  # request id -> when its prompt was posted, while pending
        self._settled_at = float("-inf")

    def posted(self, request_id: str, now: float) -> None:
        self._fresh[request_id] = now

    def settled(self, request_id: str, now: float) -> None:
        self._fresh.pop(request_id, None)
        self._settled_at = now

    def busy_for(self, now: float, posting: bool) -> float:
        """Seconds until the room is quiet (0: quiet now); ``posting``: a prompt is on its way."""
        for rid in [r for r, t in self._fresh.items() if now - t >= ANSWER_WAIT]:
            del self._fresh[rid]  # still pending, but no longer a quick answer: the person is reading
        waits = [self._settled_at + AGAIN_WAIT - now, *(t + ANSWER_WAIT - now for t in self._fresh.values())]
        if posting:
            waits.append(AGAIN_WAIT)
        return max(0.0, *waits)

