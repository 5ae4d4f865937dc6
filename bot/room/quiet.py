"""When the room is quiet enough for the bot's own events (settled edits, keycap reactions and their clean-up).

A person waits for two things: a prompt to appear and their answer to reach the
agent. Each is one event the homeserver persists and fans out to every client in
the room; any event the bot sends at the same moment is persisted in between and
makes that round slower. So background events wait for a quiet room: no prompt
being posted, no prompt posted in the last ``ANSWER_WAIT`` seconds still pending
(a quick answer may be on its way), and ``AGAIN_WAIT`` since the last settlement
(an agent often asks again at once). An edit waits at most ``EDIT_MAX_WAIT``; then
the edits waiting go together right after the next prompt is posted (while the
person reads it): the homeserver persists a burst in one go, so one round pays
for a few seconds' edits instead of every round paying for one. Pure: ``now`` is
passed in.
"""

from __future__ import annotations

ANSWER_WAIT = 1.0  # seconds a freshly posted prompt keeps the room busy while it is pending
AGAIN_WAIT = 0.1  # seconds after a settlement the room stays busy: the agent may ask again at once
EDIT_MAX_WAIT = 3.0  # seconds a settled edit waits for a quiet room at most


class Quiet:
    """What the room is busy with, by the outbox's clock."""

    def __init__(self) -> None:
        self._fresh: dict[str, float] = {}  # request id -> when its prompt was posted, while pending
        self._settled_at = float("-inf")
        self.posts = 0  # prompts posted so far: paces overdue edits

    def posted(self, request_id: str, now: float) -> None:
        self._fresh[request_id] = now
        self.posts += 1

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


class EditPacer:
    """When the held edits (prompts the room already shows settled) may go: once the room is quiet, or,
    ``EDIT_MAX_WAIT`` after they began to wait, right after the next prompt is posted."""

    def __init__(self) -> None:
        self._held_since: float | None = None
        self._posts_then = 0  # Quiet.posts when they began to wait

    @property
    def holding(self) -> bool:
        return self._held_since is not None

    def wait(self, now: float, busy: float, posts: int) -> float:
        """Seconds to wait before sending the held edits; 0: send them now. ``busy`` from :meth:`Quiet.busy_for`,
        ``posts`` :attr:`Quiet.posts`."""
        if busy > 0:
            if self._held_since is None:
                self._held_since, self._posts_then = now, posts
            due = self._held_since + EDIT_MAX_WAIT - now
            if due > 0:
                return max(0.01, min(busy, due))
            if posts == self._posts_then:  # overdue: right after the next prompt is posted (or once quiet)
                return busy
        self._held_since = None
        return 0.0

    def done(self) -> None:
        """Nothing is held."""
        self._held_since = None
