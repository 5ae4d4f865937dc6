"""Deterministic transaction ids for sends."""

from __future__ import annotations

import hashlib


def txn_id(kind: str, *parts: str) -> str:
    """A deterministic transaction id, so a retried send is never posted twice."""
    h = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:40]
    return f"pb-{kind}-{h}"
