"""The bot's own Megolm sessions read from a copy of its crypto store (bot.matrix.own_keys): what
``audit verify --against-room`` decrypts its checkpoints in an encrypted room with; from the state folder's
file and from the database's copy of the device, the file left as it was."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import vodozemac
from nio.crypto import InboundGroupSession, OlmAccount
from nio.store import DefaultStore

from bot.events.ledger import checkpoint_of
from bot.matrix.own_keys import MEGOLM, KeysUnavailable, OwnSessions, local_image, vault_image
from bot.matrix.vault import entry, pack
from bot.service.checkpoints import content as checkpoint

USER, DEVICE, ROOM = "@permbot:example.org", "BOTDEVICE", "!station:example.org"


class Device:
    """A bot device's crypto store as nio writes it (account, the inbound twin of each session it sent with)."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.store = DefaultStore(USER, DEVICE, str(folder), "DEFAULT_KEY")
        self.account = OlmAccount()
        self.store.save_account(self.account)
        self.key = str(self.account.identity_keys["curve25519"])
        self.sessions: dict[str, vodozemac.GroupSession] = {}

    def session(self, room: str) -> vodozemac.GroupSession:
        if room not in self.sessions:
            g = vodozemac.GroupSession()
            ed = str(self.account.identity_keys["ed25519"])
            self.store.save_inbound_group_session(InboundGroupSession(g.session_key.to_base64(), ed, self.key, room))
            self.sessions[room] = g
        return self.sessions[room]

    def encrypt(self, c: dict[str, Any], room: str = ROOM, session_room: str | None = None) -> dict[str, Any]:
        g = self.session(session_room or room)
        plain = json.dumps({"type": "m.room.message", "content": c, "room_id": room})
        return {
            "algorithm": MEGOLM,
            "sender_key": self.key,
            "ciphertext": g.encrypt(plain.encode()).to_base64(),
            "session_id": g.session_id,
            "device_id": DEVICE,
        }


def test_the_bots_checkpoints_decrypt_from_its_store_left_untouched(tmp_path: Path) -> None:
    dev = Device(tmp_path)
    sent = dev.encrypt(checkpoint(7, "ab" * 32))
    path = tmp_path / f"{USER}_{DEVICE}.db"
    before = hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns
    own = OwnSessions(local_image(tmp_path, USER, DEVICE), USER, DEVICE)
    plain = own.decrypt(ROOM, sent)
    assert plain is not None and checkpoint_of(plain["content"]) == (7, "ab" * 32)
    assert (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns) == before
    assert own.curve25519 == dev.key and own.sent_by_this_device(sent)
    # the same from the database's copy of the device (PostgreSQL: bot.matrix.vault)
    saved = entry(USER, DEVICE, pack(tmp_path, USER, DEVICE))
    own2 = OwnSessions(vault_image(saved, USER, DEVICE), USER, DEVICE)
    assert own2.decrypt(ROOM, sent) == plain


def test_what_it_does_not_decrypt(tmp_path: Path) -> None:
    dev = Device(tmp_path)
    other = Device(tmp_path / "other")  # another device's session: not in this store
    elsewhere = dev.encrypt(checkpoint(1, "0" * 64), room=ROOM, session_room="!other:example.org")
    own = OwnSessions(local_image(tmp_path, USER, DEVICE), USER, DEVICE)
    assert own.decrypt(ROOM, elsewhere) is None  # a session made for another room
    lost = dev.encrypt(checkpoint(2, "0" * 64), room="!third:example.org")
    assert OwnSessions(local_image(tmp_path, USER, DEVICE), USER, DEVICE).decrypt("!third:example.org", lost)
    assert own.decrypt("!third:example.org", lost) is None and own.sent_by_this_device(lost)  # a store older than it
    foreign = {**other.encrypt(checkpoint(3, "0" * 64)), "device_id": "OTHER"}
    assert own.decrypt(ROOM, foreign) is None and not own.sent_by_this_device(foreign)
    assert own.decrypt(ROOM, {"algorithm": "m.olm.v1", "session_id": "x"}) is None


def test_a_missing_or_foreign_store_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(KeysUnavailable, match="missing"):
        local_image(tmp_path, USER, DEVICE)
    Device(tmp_path)
    with pytest.raises(KeysUnavailable, match="no account for device ELSE"):
        OwnSessions(local_image(tmp_path, USER, DEVICE), USER, "ELSE")
    saved = entry(USER, DEVICE, pack(tmp_path, USER, DEVICE))
    with pytest.raises(KeysUnavailable, match="'s ELSE"):
        vault_image(saved, USER, "ELSE")
    with pytest.raises(KeysUnavailable, match="holds no copy"):
        vault_image(None, USER, DEVICE)
    with pytest.raises(KeysUnavailable, match="cannot be read"):
        OwnSessions(b"not a database" * 100, USER, DEVICE)
