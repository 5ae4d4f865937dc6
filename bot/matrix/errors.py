"""The Matrix side's two failures: one only a person can fix, and a send to retry."""

from __future__ import annotations


class MatrixFatal(Exception):
    """A problem only a person can fix (bad credentials, no access to the room)."""


class SendFailed(Exception):
    """A send the homeserver refused or could not take; retried by the caller (``code``: its errcode)."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code

    @property
    def too_large(self) -> bool:
        """The event is over the homeserver's size limit: sending it again can never work."""
        return self.code in ("M_TOO_LARGE", "413")

    @property
    def rate_limited(self) -> bool:
        """Refused for rate (or left out by the bot's own count of the homeserver's limit)."""
        return self.code in ("M_LIMIT_EXCEEDED", "429")


REVOKED = ("M_UNKNOWN_TOKEN", "M_MISSING_TOKEN")


class TokenRevoked(MatrixFatal):
    """The homeserver no longer knows the access token (healed by a new login when a password is set)."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code
