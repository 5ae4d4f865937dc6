"""JSON-RPC ids as the proxy keys them (``id_key``) and makes them (``FWD_PREFIX``: requests
forwarded to the client in ``--fallback forward`` mode), and the proxy's own lines (``line_of``)."""

from __future__ import annotations

import json
from typing import Any

FWD_PREFIX = "permission-bot:fwd:"


def id_key(rpc_id: Any) -> tuple[str, Any] | None:
    """A JSON-RPC id as a dict key that keeps ``1``, ``true`` and ``"1"`` apart; None for odd ids."""
    if isinstance(rpc_id, bool) or not isinstance(rpc_id, (int, str)):
        return None
    return (type(rpc_id).__name__, rpc_id)


def line_of(msg: Any) -> bytes:
    """A JSON-RPC message as one compact line on the wire (UTF-8, newline-terminated)."""
    return (json.dumps(msg, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
