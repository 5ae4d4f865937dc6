"""The bot's own Megolm sessions, read from a copy of its crypto store: what ``audit verify --against-room``
decrypts the bot's own events in an encrypted room with.

nio keeps, for every Megolm session the bot's device sent with, the matching inbound session in its crypto
store (SQLite, ``{user}_{device}.db`` under the state folder; on PostgreSQL the database's copy of the device,
:mod:`bot.matrix.vault`). This module reads an in-memory image of that file and never the file itself for
writing: no nio client is made, nothing is logged in, uploaded, synced or saved, so a daemon running on the
same device is not disturbed. It decrypts only events of sessions the store says this device created
(their sender key is the device's own) in the room the session was made for.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bot.matrix.vault import VaultError, archive_of, read_member, store_image

MEGOLM = "m.megolm.v1.aes-sha2"


class KeysUnavailable(Exception):
    """The device's crypto store cannot be read (missing, another device's, damaged)."""


def store_name(user_id: str, device_id: str) -> str:
    return f"{user_id}_{device_id}.db"


def local_image(state_dir: str | Path, user_id: str, device_id: str) -> bytes:
    """A consistent copy of the device's crypto store under ``state_dir`` (read-only open, SQLite's backup
    API into memory: a running daemon's writes wait at most for the copy, and the file is never written)."""
    path = Path(state_dir) / store_name(user_id, device_id)
    if not path.is_file():
        raise KeysUnavailable(f"the crypto store of device {device_id} is missing ({path})")
    try:
        return store_image(path, read_only=True)
    except sqlite3.Error as e:
        raise KeysUnavailable(f"cannot read the crypto store of device {device_id} ({e})") from None


def vault_image(saved: Any, user_id: str, device_id: str) -> bytes:
    """The crypto store out of the database's copy of the device (PostgreSQL, ``VAULT_KEY``)."""
    if not isinstance(saved, Mapping):
        raise KeysUnavailable(f"the database holds no copy of device {device_id}'s crypto store")
    try:
        data = read_member(archive_of(saved, user_id, device_id), store_name(user_id, device_id))
    except VaultError as e:
        raise KeysUnavailable(str(e)) from None
    if data is None:
        raise KeysUnavailable(f"the database's copy of device {device_id} holds no crypto store")
    return data


class OwnSessions:
    """The inbound Megolm sessions this device made for itself, from an image of its crypto store."""

    def __init__(self, image: bytes, user_id: str, device_id: str, pickle_key: str = "") -> None:
        from nio import AsyncClientConfig

        self.device_id = device_id
        self.pickle_key = pickle_key or AsyncClientConfig().pickle_key  # what the daemon's nio client uses
        db = sqlite3.connect(":memory:")
        try:
            db.deserialize(image)
            row = db.execute(
                "SELECT id, account, shared FROM accounts WHERE user_id=? AND device_id=?", (user_id, device_id)
            ).fetchone()
            if row is None:
                raise KeysUnavailable(f"the crypto store holds no account for device {device_id}")
            rows = db.execute(
                "SELECT session_id, room_id, sender_key, fp_key, session FROM megolminboundsessions WHERE account_id=?",
                (row[0],),
            ).fetchall()
        except sqlite3.Error as e:
            raise KeysUnavailable(f"the crypto store of device {device_id} cannot be read ({e})") from None
        finally:
            db.close()
        self.curve25519 = _identity_key(_bytes(row[1]), self.pickle_key, bool(row[2]), device_id)
        self._rows = {str(r[0]): (str(r[1]), str(r[2]), str(r[3]), _bytes(r[4])) for r in rows}
        self._open: dict[str, Any] = {}

    def _session(self, session_id: str) -> Any:
        from nio.crypto import InboundGroupSession

        got = self._open.get(session_id)
        if got is None:
            room_id, sender_key, fp_key, pickled = self._rows[session_id]
            got = InboundGroupSession.from_pickle(pickled, fp_key, sender_key, room_id, self.pickle_key)
            self._open[session_id] = got
        return got

    def sent_by_this_device(self, content: Mapping[str, Any]) -> bool:
        """Whether an ``m.room.encrypted`` content says it was sent by this device (its key or its id)."""
        return content.get("sender_key") == self.curve25519 or content.get("device_id") == self.device_id

    def decrypt(self, room_id: str, content: Mapping[str, Any]) -> dict[str, Any] | None:
        """The plaintext event (``type``, ``content``) of an ``m.room.encrypted`` content sent in ``room_id``
        with one of this device's own sessions; None when it is not one, or does not decrypt to an event of
        that room."""
        if content.get("algorithm") != MEGOLM or not isinstance(content.get("ciphertext"), str):
            return None
        sid = str(content.get("session_id"))
        row = self._rows.get(sid)
        if row is None or row[0] != room_id or row[1] != self.curve25519:
            return None
        try:
            plain, _ = self._session(sid).decrypt(content["ciphertext"])
            event = json.loads(plain)
        except Exception:  # vodozemac's errors, a bad pickle, not JSON: not readable
            return None
        if not isinstance(event, dict) or event.get("room_id") != room_id or not isinstance(event.get("content"), dict):
            return None
        return event


def _identity_key(pickled: bytes, pickle_key: str, shared: bool, device_id: str) -> str:
    """The device's curve25519 key, from its account in the store."""
    from nio.crypto import OlmAccount

    try:
        return str(OlmAccount.from_pickle(pickled, pickle_key, shared).identity_keys["curve25519"])
    except Exception:  # vodozemac's pickle errors
        raise KeysUnavailable(f"the crypto store's account of device {device_id} cannot be read") from None


def _bytes(v: Any) -> bytes:
    return v.encode() if isinstance(v, str) else bytes(v)
