"""The ledger checkpoints the bot posted in its station rooms, read back for ``audit verify --against-room``.

It reuses the daemon's saved Matrix session (as ``e2ee`` does) and reads each room's history backwards
(``/messages``, never ``/sync``: the bot's own events only: a checkpoint from anyone else counts for
nothing). In an encrypted room the bot's events are decrypted with the Megolm sessions its own device
sent them with, read from a copy of its crypto store (:mod:`bot.matrix.own_keys`: the state folder's file,
or on PostgreSQL the database's copy of the device); nothing is written, no device is made, nothing is
uploaded and no to-device message is taken, so a running daemon is not disturbed. It fails closed: an
event this device sent that its store cannot decrypt, or an encrypted room where no checkpoint can be
read, stops the check (exit 2) rather than passing it.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from bot.config import Config
from bot.events.ledger import checkpoint_of
from bot.matrix.errors import MatrixFatal
from bot.matrix.own_keys import KeysUnavailable, OwnSessions, local_image, vault_image

PAGE = 500


class Keys:
    """The device's own sessions, read once, when the first encrypted event of the bot comes."""

    def __init__(self, cfg: Config, session: dict[str, Any], vault: Any) -> None:
        self.cfg, self.session, self.vault = cfg, session, vault
        self._own: OwnSessions | None = None

    def get(self) -> OwnSessions:
        if self._own is None:
            user, device = str(self.session.get("user_id") or self.cfg.matrix.user_id), str(self.session["device_id"])
            try:
                image = (
                    vault_image(self.vault, user, device)
                    if self.vault is not _LOCAL
                    else local_image(self.cfg.state_dir, user, device)
                )
                self._own = OwnSessions(image, user, device)
            except KeysUnavailable as e:
                raise MatrixFatal(f"cannot read the checkpoints in encrypted rooms: {e}") from None
        return self._own


_LOCAL = object()  # the device's files are in the state folder (SQLite state), not in the database


async def _session(cfg: Config) -> tuple[dict[str, Any], Any]:
    """The saved Matrix session, and the database's copy of the device (PostgreSQL) or ``_LOCAL``."""
    from bot.inbox.store import Inbox
    from bot.matrix.session import SESSION_KEY
    from bot.matrix.vault import VAULT_KEY
    from bot.service.state_db import database_url, new_holder, state_database

    inbox = Inbox(state_database(cfg, new_holder()))
    try:
        await inbox.open_read_only()
        raw = await inbox.get_kv(SESSION_KEY)
        vault = await inbox.get_json(VAULT_KEY) if database_url(cfg) is not None else _LOCAL
    finally:
        await inbox.close()
    session = json.loads(raw) if raw else None
    if not isinstance(session, dict) or not session.get("access_token") or not session.get("device_id"):
        raise MatrixFatal("no saved Matrix session in the state; start the bot once first")
    return session, vault


async def _room_id(api: Any, room: str) -> str:
    if room.startswith("!"):
        return room
    found = await api.call("GET", f"/directory/room/{quote(room)}")
    return str(found.get("room_id") or "")


async def room_checkpoints(
    api: Any, room_id: str, bot: str, keys: Keys | None = None
) -> tuple[list[tuple[int, str]], int, int]:
    """The (seq, hash) checkpoints the bot posted in ``room_id`` (plain, or encrypted and decrypted with
    ``keys``), and the counts of the bot's encrypted events not read: sent by this device, by another."""
    flt = json.dumps({"senders": [bot], "types": ["m.room.message", "m.room.encrypted"], "lazy_load_members": True})
    found: list[tuple[int, str]] = []
    mine, others, token = 0, 0, ""
    while True:
        path = f"/rooms/{quote(room_id)}/messages?dir=b&limit={PAGE}&filter={quote(flt)}"
        page = await api.call("GET", path + (f"&from={quote(token)}" if token else ""))
        for ev in page.get("chunk") or []:
            if not isinstance(ev, dict) or ev.get("sender") != bot:
                continue
            c = ev.get("content")
            if ev.get("type") == "m.room.encrypted" and isinstance(c, dict):
                if keys is None:
                    others += 1
                    continue
                own = keys.get()
                plain = own.decrypt(room_id, c)
                if plain is None:
                    mine, others = (mine + 1, others) if own.sent_by_this_device(c) else (mine, others + 1)
                    continue
                if plain.get("type") != "m.room.message":
                    continue
                c = plain["content"]
            cp = checkpoint_of(c)
            if cp is not None:
                found.append(cp)
        nxt = page.get("end")
        if not page.get("chunk") or not isinstance(nxt, str) or nxt == token:
            return found, mine, others
        token = nxt


async def read_checkpoints(cfg: Config) -> list[tuple[str, int, str]]:
    """Every station room's checkpoints as (room name, seq, hash)."""
    from bot.matrix.cross_signing import Api, HttpError

    session, vault = await _session(cfg)
    keys = Keys(cfg, session, vault)
    api = Api(cfg.matrix.homeserver, str(session["access_token"]))
    rooms = [("default", cfg.matrix.room), *((r.name, r.room) for r in cfg.rooms)]
    out: list[tuple[str, int, str]] = []
    try:
        for name, room in rooms:
            room_id = await _room_id(api, room)
            if not room_id:
                raise MatrixFatal(f"room {name}: {room} is not known to the homeserver")
            cps, mine, others = await room_checkpoints(api, room_id, cfg.matrix.user_id, keys)
            if mine:
                raise MatrixFatal(
                    f"room {name}: {mine} encrypted events the bot's device {session['device_id']} sent cannot be "
                    "decrypted with its crypto store (not this device's store, changed, or a copy older than them)"
                )
            if others and not cps:
                raise MatrixFatal(
                    f"room {name} is encrypted and none of its checkpoints can be read "
                    "(they were sent by another device of the bot)"
                )
            out.extend((name, seq, h) for seq, h in cps)
    except HttpError as e:
        raise MatrixFatal(f"cannot read the rooms' checkpoints from the homeserver ({e})") from None
    return out
