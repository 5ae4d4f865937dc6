"""The request digest: what a decision is bound to. Pure: no I/O.

The daemon computes it from a submission, and the clients that submit (the ACP proxy, the hook
command) compute it from what they sent, to check that a record handed back is theirs.
"""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785

EXTRAS = ("key", "label", "toolCallContext", "cwd")
"""A submission's fields that are not the agent's params (the submitter's own): outside the digest."""
HEADER = "Permission-Bot-Digest"
"""The hook routes' answer header: the digest of the record the decision is for."""


def digest_params(params: dict[str, Any]) -> str:
    """Lowercase hex SHA-256 of the RFC 8785 canonical JSON of ``params``.

    Raises ``ValueError`` (rfc8785's ``CanonicalizationError``) for values JCS cannot hold: NaN, infinities,
    integers beyond 2**53.
    """
    return hashlib.sha256(rfc8785.dumps(params)).hexdigest()


def submission_digest(body: dict[str, Any]) -> str | None:
    """The digest the daemon gives a submitted ``body`` (its params: the body less :data:`EXTRAS`),
    or None when it cannot have one (the daemon refuses such a body)."""
    try:
        return digest_params({k: v for k, v in body.items() if k not in EXTRAS})
    except (ValueError, TypeError, RecursionError):
        return None
