"""The ledger checkpoints the bot posted in its station rooms, read back for ``audit verify --against-room``.

It reuses the daemon's saved Matrix session (as ``e2ee`` does: a member's read access is all it needs) and
reads each room's history backwards (``/messages``, never ``/sync``), the bot's own events only: a
checkpoint from anyone else counts for nothing. Checkpoints are state events, never encrypted, so nothing
is decrypted and no key is needed (bot.events.checkpoints says what is read, and what a redacted one is).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from bot.config import Config
from bot.events.checkpoints import CHECKPOINT_TYPE, Seen, sighting
from bot.matrix.errors import MatrixFatal

PAGE = 500


async def _session(cfg: Config) -> dict[str, Any]:
    """The saved Matrix session."""
    from bot.inbox.store import Inbox
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


async def room_checkpoints(api: Any, room_id: str, bot: str) -> list[Seen]:
    """The checkpoints the bot posted in ``room_id``, oldest first (redacted ones as unreadable)."""
    flt = json.dumps({"senders": [bot], "types": ["m.room.message", CHECKPOINT_TYPE], "lazy_load_members": True})
    newest_first: list[Seen] = []
    token = ""
    while True:
        path = f"/rooms/{quote(room_id)}/messages?dir=b&limit={PAGE}&filter={quote(flt)}"
        page = await api.call("GET", path + (f"&from={quote(token)}" if token else ""))
        for ev in page.get("chunk") or []:
            if isinstance(ev, dict) and ev.get("sender") == bot and (s := sighting(ev)) is not None:
                newest_first.append(s)
        nxt = page.get("end")
        if not page.get("chunk") or not isinstance(nxt, str) or nxt == token:
            return newest_first[::-1]
        token = nxt


async def read_checkpoints(cfg: Config) -> dict[str, list[Seen]]:
    """Every station room's checkpoints, oldest first, by room name."""
    from bot.matrix.cross_signing import Api, HttpError

    session = await _session(cfg)
    api = Api(cfg.matrix.homeserver, str(session["access_token"]))
    rooms = [("default", cfg.matrix.room), *((r.name, r.room) for r in cfg.rooms)]
    out: dict[str, list[Seen]] = {}
    try:
        for name, room in rooms:
            room_id = await _room_id(api, room)
            if not room_id:
                raise MatrixFatal(f"room {name}: {room} is not known to the homeserver")
            out[name] = await room_checkpoints(api, room_id, cfg.matrix.user_id)
    except HttpError as e:
        raise MatrixFatal(f"cannot read the rooms' checkpoints from the homeserver ({e})") from None
    return out
