"""Will an event fit the homeserver's 64 KiB limit? Sizes of a prompt and its worst-case settled edit.

Synapse refuses a PDU over 65,536 bytes (``M_TOO_LARGE``, HTTP 413); the PDU is the content plus an
envelope (ids, hashes, signatures, prev/auth events) that ``ENVELOPE`` reserves. In an encrypted
room the content travels as Megolm ciphertext: base64 of the JSON plaintext plus its MAC and
signature, beside the clear ``m.relates_to`` and the session's ids. Pure: no I/O.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_EVENT = 65_536
ENVELOPE = 2_048  # room and event ids, sender, hashes, signatures, prev/auth events, timestamps
MEGOLM_OVERHEAD = 128  # version, message index, MAC and ed25519 signature inside the ciphertext
MEGOLM_FIELDS = 512  # algorithm, sender_key, device_id, session_id next to the ciphertext


def _json_len(v: Any, *, ascii_only: bool = False) -> int:
    return len(json.dumps(v, ensure_ascii=ascii_only, separators=(",", ":")).encode())


def event_size(content: dict[str, Any], *, encrypted: bool, event_type: str = "m.room.message") -> int:
    """Bytes of the event that carries ``content``, envelope included (ciphertext in an encrypted room)."""
    if not encrypted:
        return _json_len(content) + ENVELOPE
    plain = _json_len({"type": event_type, "content": content, "room_id": "!" + "x" * 255}, ascii_only=True)
    ciphertext = 4 * math.ceil((plain + MEGOLM_OVERHEAD) / 3)
    clear = _json_len(content.get("m.relates_to", {}))
    return ciphertext + clear + MEGOLM_FIELDS + ENVELOPE
