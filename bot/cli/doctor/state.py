"""What doctor reads of the daemon's state: the inbox opened read-only through the Inbox class (SQLite under
``state.path``, or the daemons' PostgreSQL database when ``state.database`` is set: there the device and its
cross-signing keys are the database's copy, not files of this machine)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from bot.config import Config
from bot.inbox.db import DatabaseError, DatabaseUrlError
from bot.inbox.store import Inbox
from bot.matrix.client import CRYPTO_KEY, SESSION_KEY
from bot.matrix.cross_signing import FILE_NAME as CROSS_SIGNING_FILE
from bot.matrix.identities import PIN_KEY, read_pin
from bot.matrix.vault import VAULT_KEY, VaultError, archive_of, read_member
from bot.service.state_db import database_url, state_database


@dataclass
class Saved:
    """The daemon's saved Matrix session (for this bot), its device keys, and the pinned identities."""

    session: dict[str, str] | None = None
    crypto: Any = None
    pins: dict[str, str] = field(default_factory=dict)  # user -> pinned master key ("": seen without one)
    known: dict[str, dict[str, str]] = field(default_factory=dict)  # seen without one: user -> devices recorded
    database: bool = False  # the state is in PostgreSQL ([state] database): the device is the database's copy
    identity: bytes | None = None  # PostgreSQL: cross_signing.json from the database's copy of the device


def _json(raw: str | None) -> Any:
    try:
        return json.loads(raw) if raw is not None else None
    except ValueError:
        return None


async def _read(cfg: Config) -> Saved:
    url = database_url(cfg)
    db = cfg.state_dir / "inbox.sqlite3"
    try:
        if url is None and not db.is_file():
            return Saved()
    except OSError:  # a folder this user may not read (doctor says so on its state line)
        return Saved()
    try:
        inbox = Inbox(state_database(cfg, "doctor") if url else db)  # PostgreSQL: the daemons' database
    except DatabaseUrlError:
        return Saved(database=True)
    try:
        await inbox.open_read_only()
        session = _json(await inbox.get_kv(SESSION_KEY))
        crypto = _json(await inbox.get_kv(CRYPTO_KEY))
        pinned = await inbox.kv_with_prefix(PIN_KEY)
        vault = _json(await inbox.get_kv(VAULT_KEY)) if url else None
    except (sqlite3.Error, DatabaseError, OSError):
        return Saved(database=url is not None)
    finally:
        await inbox.close()
    pins: dict[str, str] = {}
    known: dict[str, dict[str, str]] = {}
    for k, v in pinned.items():
        pin = read_pin(_json(v))
        if pin.master or pin.seen_without:
            pins[k[len(PIN_KEY):]] = pin.master or ""
        if pin.seen_without:
            known[k[len(PIN_KEY):]] = pin.devices
    ok = isinstance(session, dict) and session.get("user_id") == cfg.matrix.user_id and session.get("access_token")
    saved = {k: str(session.get(k) or "") for k in ("user_id", "device_id", "access_token")} if ok else None
    identity = None
    if saved is not None and isinstance(vault, dict):
        try:
            blob = archive_of(vault, saved["user_id"], saved["device_id"])
            identity = read_member(blob, CROSS_SIGNING_FILE)
        except VaultError:
            identity = None
    return Saved(saved, crypto, pins, known, database=url is not None, identity=identity)


def read_saved(cfg: Config) -> Saved:
    """Read the daemon's saved state once (nothing when there is no state yet or it cannot be read)."""
    return asyncio.run(_read(cfg))
