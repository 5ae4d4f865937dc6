"""Which database the daemon's state lives in: ``[state] database`` (env ``PERMISSION_BOT_DATABASE_URL``
wins), else SQLite under ``[state] path`` as always.

``holder`` names this daemon among several on one PostgreSQL database (host, pid and a random tail):
its connections' ``application_name`` and the leadership row say who holds what.
"""

from __future__ import annotations

import os
import secrets
import socket
from pathlib import Path

from bot.config import Config
from bot.inbox.db import Database, create
from bot.inbox.db.url import resolve, source_key


def new_holder() -> str:
    """A name for this daemon run, unique among daemons sharing a database."""
    return f"{socket.gethostname()[:32]}-{os.getpid()}-{secrets.token_hex(3)}"


def database_url(cfg: Config) -> str | None:
    """The database URL in force, or None for SQLite under the state folder."""
    return resolve(cfg.state.database)


def state_database(cfg: Config, holder: str) -> Database:
    """The daemon's database, not started (raises ``DatabaseUrlError``, one line without a password)."""
    url = database_url(cfg)
    if not url:  # SQLite under the state folder: state.path chose it
        return create(f"sqlite:{Path(cfg.state_dir, 'inbox.sqlite3').resolve()}", holder=holder, key="state.path")
    return create(url, holder=holder, key=source_key())
