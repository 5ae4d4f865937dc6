"""End-to-end encryption helpers for the Matrix side (matrix-nio with vodozemac).

Pure pieces (plaintext-shaped events, the undecryptable queue's records) and every
use of matrix-nio's private API (the adjustments to its Olm machine, its raw send,
its sharing mark): tests/test_nio_internals.py fails loudly when a nio upgrade
changes one of them. Network I/O otherwise stays in the other modules of ``bot.matrix``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import structlog
from nio import RoomSendResponse
from nio.api import Api

log = structlog.get_logger("matrix.crypto")

MEGOLM = "m.megolm.v1.aes-sha2"
ANSWER_TYPES = frozenset({"m.room.message", "m.reaction"})
STRUCTURED_KEY = "dev.agentpod.permission.answer"


def plain_event(decrypted: Mapping[str, Any], wrapper: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A decrypted event shaped like the plaintext event it stands for.

    ``decrypted`` is what Megolm decryption gave (``type``, ``content``, ``room_id``, and
    what nio added); ``wrapper`` the ``m.room.encrypted`` event as the homeserver sent it.
    The homeserver's fields (``event_id``, ``sender``, ``origin_server_ts``, ``room_id``)
    come from the wrapper; a relation kept in the wrapper's cleartext ``m.relates_to``
    is merged into the content when the decrypted content has none.
    """
    out = copy.deepcopy(dict(decrypted))
    if not isinstance(content := out.get("content"), dict):
        content = out["content"] = {}
    if wrapper is None:
        return out
    out.update({k: wrapper[k] for k in ("event_id", "sender", "origin_server_ts", "room_id") if k in wrapper})
    wcontent = wrapper.get("content")
    if isinstance(wcontent, Mapping) and "m.relates_to" in wcontent and "m.relates_to" not in content:
        content["m.relates_to"] = copy.deepcopy(wcontent["m.relates_to"])
    if isinstance(wunsigned := wrapper.get("unsigned"), Mapping):
        unsigned = out.get("unsigned")
        out["unsigned"] = {**copy.deepcopy(dict(wunsigned)), **(unsigned if isinstance(unsigned, Mapping) else {})}
    return out


def is_targeted(source: Mapping[str, Any]) -> bool:
    """Does the event name what it answers (a reply, thread, reaction or structured answer)?

    A plain untargeted message answers "the only pending prompt" at the moment it is
    handled; when it is decrypted long after it was sent that may be another prompt.
    """
    content = source.get("content")
    if not isinstance(content, Mapping):
        return False
    return isinstance(content.get("m.relates_to"), Mapping) or STRUCTURED_KEY in content


def fingerprint(key: str | None) -> str | None:
    """An ed25519 key in groups of four, as Element shows a session key."""
    return " ".join(key[i : i + 4] for i in range(0, len(key), 4)) if key else None


@dataclass
class Waiting:
    """An event that could not be decrypted yet, kept aside until its key arrives."""

    source: dict[str, Any]
    since: float  # wall-clock time it was first seen
    told: bool = False  # the sender was asked to resend

    @property
    def event_id(self) -> str:
        return str(self.source.get("event_id", ""))

    @property
    def sender(self) -> str:
        return str(self.source.get("sender", ""))

    @property
    def session_id(self) -> str:
        c = self.source.get("content")
        return str(c.get("session_id", "")) if isinstance(c, Mapping) else ""

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "since": self.since, "told": self.told}

    @classmethod
    def from_json(cls, d: Any) -> Waiting | None:
        if not isinstance(d, Mapping):
            return None
        source, since = d.get("source"), d.get("since")
        if not isinstance(source, dict) or not isinstance(since, int | float) or not source.get("event_id"):
            return None
        return cls(source=source, since=float(since), told=bool(d.get("told")))


def accept_forwards_from_session_owner(olm: Any) -> None:
    """Let nio accept a forwarded room key from the very device that created the session.

    nio takes ``m.forwarded_room_key`` only from the account's own verified devices, so an
    answer to the bot's key request from the sender's device (what Element does when the
    original ``m.room_key`` was lost) would be dropped. A forward whose Olm sender is the
    session's creator, with an empty forwarding chain and the creator's own signing key,
    is as trustworthy as the original ``m.room_key``; and only a key the bot asked for
    (an outgoing key request for that session in that room) is taken.
    """
    original = getattr(olm, "_should_accept_forward", None)
    if original is None or getattr(original, "_pb_patched", False):
        return

    def should_accept(sender: str, sender_key: str, event: Any) -> bool:
        if original(sender, sender_key, event):
            return True
        try:
            content = event.source["content"]
            request = olm.outgoing_key_requests.get(event.session_id)
            if request is None or request.room_id != event.room_id or event.algorithm != MEGOLM:
                return False
            if content.get("sender_key") != sender_key or content.get("forwarding_curve25519_key_chain"):
                return False
            device = olm.device_store.device_from_sender_key(sender, sender_key)
            ok = device is not None and device.ed25519 == content.get("sender_claimed_ed25519_key")
        except (AttributeError, KeyError, TypeError):
            return False
        if ok:
            log.info("forwarded_key_accepted", sender=sender, session_id=event.session_id)
        return bool(ok)

    should_accept._pb_patched = True  # type: ignore[attr-defined]
    olm._should_accept_forward = should_accept


async def send_raw(client: Any, room_id: str, event_type: str, content: dict[str, Any], txn: str) -> Any:
    """Send an already encrypted event with nio's private ``_send`` (its room_send would re-encrypt)."""
    method, path, data = Api.room_send(client.access_token, room_id, event_type, content, txn)
    return await client._send(RoomSendResponse, method, path, data, (room_id,))


def clear_sharing_mark(client: Any, room_id: str) -> None:
    """Drop nio's private "sharing in progress" mark for the room (left behind when a key claim fails)."""
    client.sharing_session.pop(room_id, None)
