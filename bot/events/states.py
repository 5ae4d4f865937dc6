"""The words a request's state and its settlement path (``via``) may be: stored, sent and shown as they are."""

from __future__ import annotations

from enum import StrEnum


class _Word(StrEnum):
    """A ``StrEnum`` whose ``repr`` is its word's, so log lines read ``via='rule'`` as before."""

    def __repr__(self) -> str:
        return repr(self.value)


class State(_Word):
    """Where a request is: waiting, or settled one of three ways (never back)."""

    PENDING = "pending"
    RESOLVED = "resolved"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


class Via(_Word):
    """How a request was settled."""

    MATRIX = "matrix"  # a reply or plain message in the room
    REACTION = "reaction"
    STRUCTURED = "structured"  # a client's structured answer event
    API = "api"
    RULE = "rule"
    TIMEOUT = "timeout"
    CANCEL = "cancel"


class Change(_Word):
    """What an inbox listener is told happened to a record (``Inbox.listen``)."""

    REQUEST = "request"  # a new pending request
    RESOLVED = "resolved"  # it left pending (resolved, expired or cancelled), once
    AMENDED = "amended"  # settled, then shown otherwise: a watched harness did not take the answer

    @property
    def event(self) -> str:
        """Its name on GET /events and in webhooks: ``permission-request`` and so on."""
        return f"permission-{self.value}"


VIA_WORDS: dict[str, str] = {
    Via.MATRIX: "reply",
    Via.REACTION: "reaction",
    Via.STRUCTURED: "app",
    Via.API: "API",
    Via.RULE: "rule",
    Via.TIMEOUT: "timeout",
    Via.CANCEL: "cancellation",
}


def via_words(via: str) -> str:
    """``via`` as people read it (an unknown one as it is)."""
    return VIA_WORDS.get(via, via)
