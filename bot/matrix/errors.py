"""The Matrix side's two failures: one only a person can fix, and a send to retry."""

from __future__ import annotations


class MatrixFatal(Exception):
    """A problem only a person can fix (bad credentials, no access to the room)."""


class SendFailed(Exception):
    """A send the homeserver refused or could not take; retried by the caller."""
