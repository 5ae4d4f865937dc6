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
