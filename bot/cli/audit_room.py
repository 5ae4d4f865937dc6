"""The ledger checkpoints the bot posted in its station rooms, read back for ``audit verify --against-room``.

It reuses the daemon's saved Matrix session (as ``e2ee`` does) and reads each room's history backwards
(``/messages``, the bot's own ``m.room.message`` events only: a checkpoint from anyone else counts for
nothing). An encrypted room's checkpoints cannot be read this way: that room is named and not checked.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from bot.config import Config
from bot.events.ledger import checkpoint_of

PAGE = 500


async def _session(cfg: Config) -> dict[str, Any]:
    from bot.inbox.store import Inbox
    from bot.matrix.errors import MatrixFatal
    from bot.matrix.session import SESSION_KEY
    from bot.service.state_db import new_holder, state_database

    inbox = Inbox(state_database(cfg, new_holder()))
    try:
        await inbox.open_read_only()
        raw = await inbox.get_kv(SESSION_KEY)
    finally:
        await inbox.close()
    session = json.loads(raw) if raw else None
    if not isinstance(session, dict) or not session.get("access_token"):
        raise MatrixFatal("no saved Matrix session in the state; start the bot once first")
    return session


async def _room_id(api: Any, room: str) -> str:
    if room.startswith("!"):
        return room
    found = await api.call("GET", f"/directory/room/{quote(room)}")
    return str(found.get("room_id") or "")


async def room_checkpoints(api: Any, room_id: str, bot: str) -> tuple[list[tuple[int, str]], bool]:
    """The (seq, hash) checkpoints the bot posted in ``room_id``, and whether the room holds encrypted
    events from the bot (which this command cannot read)."""
    flt = json.dumps({"senders": [bot], "types": ["m.room.message", "m.room.encrypted"], "lazy_load_members": True})
    found: list[tuple[int, str]] = []
    encrypted, token = False, ""
    while True:
        path = f"/rooms/{quote(room_id)}/messages?dir=b&limit={PAGE}&filter={quote(flt)}"
        page = await api.call("GET", path + (f"&from={quote(token)}" if token else ""))
        for ev in page.get("chunk") or []:
            if not isinstance(ev, dict) or ev.get("sender") != bot:
                continue
            if ev.get("type") == "m.room.encrypted":
                encrypted = True
                continue
            cp = checkpoint_of(ev.get("content"))
            if cp is not None:
                found.append(cp)
        nxt = page.get("end")
        if not page.get("chunk") or not isinstance(nxt, str) or nxt == token:
            return found, encrypted
        token = nxt


async def read_checkpoints(cfg: Config) -> list[tuple[str, int, str]]:
    """Every station room's checkpoints as (room name, seq, hash)."""
    from bot.matrix.cross_signing import Api, HttpError
    from bot.matrix.errors import MatrixFatal

    session = await _session(cfg)
    api = Api(cfg.matrix.homeserver, str(session["access_token"]))
    rooms = [("default", cfg.matrix.room), *((r.name, r.room) for r in cfg.rooms)]
    out: list[tuple[str, int, str]] = []
    try:
        for name, room in rooms:
            room_id = await _room_id(api, room)
            if not room_id:
                raise MatrixFatal(f"room {name}: {room} is not known to the homeserver")
            cps, encrypted = await room_checkpoints(api, room_id, cfg.matrix.user_id)
            if encrypted and not cps:
                raise MatrixFatal(f"room {name} is encrypted: its checkpoints cannot be read by this command")
            out.extend((name, seq, h) for seq, h in cps)
    except HttpError as e:
        raise MatrixFatal(f"cannot read the rooms' checkpoints from the homeserver ({e})") from None
    return out
