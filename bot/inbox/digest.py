"""The request digest: what a decision is bound to. Pure: no I/O."""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785


def digest_params(params: dict[str, Any]) -> str:
    """Lowercase hex SHA-256 of the RFC 8785 canonical JSON of ``params``.

    Raises ``ValueError`` (rfc8785's ``CanonicalizationError``) for values JCS cannot hold: NaN, infinities,
    integers beyond 2**53.
    """
    return hashlib.sha256(rfc8785.dumps(params)).hexdigest()
