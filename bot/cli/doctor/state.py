"""What doctor reads of the daemon's state: the inbox opened read-only through the Inbox class."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from bot.config import Config
from bot.inbox.db import DatabaseError
from bot.inbox.store import Inbox
from bot.matrix.client import CRYPTO_KEY, SESSION_KEY
from bot.matrix.identities import PIN_KEY, read_pin


@dataclass
class Saved:
    """The daemon's saved Matrix session (for this bot), its device keys, and the pinned identities."""

    session: dict[str, str] | None = None
    crypto: Any = None
    pins: dict[str, str] = field(default_factory=dict)  # user -> pinned master key ("": seen without one)


def _json(raw: str | None) -> Any:
    try:
        return json.loads(raw) if raw is not None else None
    except ValueError:
        return None


async def _read(cfg: Config) -> Saved:
    db = cfg.state_dir / "inbox.sqlite3"
    if not db.is_file():
        return Saved()
    inbox = Inbox(db)
    try:
        await inbox.open_read_only()
        session = _json(await inbox.get_kv(SESSION_KEY))
        crypto = _json(await inbox.get_kv(CRYPTO_KEY))
        pinned = await inbox.kv_with_prefix(PIN_KEY)
    except (sqlite3.Error, DatabaseError):
        return Saved()
    finally:
        await inbox.close()
    pins: dict[str, str] = {}
    for k, v in pinned.items():
        master, seen_without = read_pin(_json(v))
        if master or seen_without:
            pins[k[len(PIN_KEY):]] = master or ""
    ok = isinstance(session, dict) and session.get("user_id") == cfg.matrix.user_id and session.get("access_token")
    saved = {k: str(session.get(k) or "") for k in ("user_id", "device_id", "access_token")} if ok else None
    return Saved(saved, crypto, pins)


def read_saved(cfg: Config) -> Saved:
    """Read the daemon's saved state once (nothing when there is no state yet or it cannot be read)."""
    return asyncio.run(_read(cfg))
