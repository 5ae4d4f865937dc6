"""Floods: the caps on pending requests (``[api] max_pending_per_token``, ``max_pending_per_session``)
and the notice a room gets when one of its agent tokens reaches its cap.

The inbox refuses a new request over a cap (:class:`bot.inbox.sessions.TooManyPending`, answered 429),
counting in the submission's own transaction. The room hears it once an episode: at the first refusal
of a token, and again only after that token had a request accepted (its pending count fell below the
cap) and then reached it again. Kept per daemon, in memory: a restart, or another daemon on the same
database, may say it once more.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog

from bot.inbox.sessions import PendingCaps

log = structlog.get_logger("daemon")


def cap_notice(token: str, cap: int, at: float) -> str:
    """The room's notice that agent token ``token`` is at its cap (``at``: when, shown in UTC)."""
    when = time.strftime("%H:%M:%S UTC", time.gmtime(at))
    return (f"Agent token {token!r} has {cap} pending requests, the most it may have "
            f"(api.max_pending_per_token): its further requests are refused until some of these are "
            f"answered or withdrawn. Since {when}; said once until it is below the cap again.")


class Floods:
    """Which agent tokens are at their cap now, and the notice when one gets there."""

    def __init__(self, caps: PendingCaps, post: Callable[[str, str], None]) -> None:
        self.caps = caps
        self._post = post  # (room, text): an m.notice in that station room
        self._capped: set[str] = set()

    def refused(self, token: str | None, room: str, now: float) -> None:
        """A submission of ``token`` (None: a session's cap) was refused; the room hears it at an episode's start."""
        if token is None or token in self._capped:
            return
        self._capped.add(token)
        log.warning("agent_token_at_cap", token=token, room=room, cap=self.caps.per_token)
        self._post(room, cap_notice(token, self.caps.per_token, now))

    def accepted(self, token: str | None) -> None:
        """A submission of ``token`` was accepted: its episode at the cap, if any, is over."""
        if token is not None:
            self._capped.discard(token)
