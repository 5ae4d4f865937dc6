"""`permission-bot state migrate [--to URL | --to-env VAR | --to-file PATH] [--config PATH] [--without-crypto]`:
a SQLite state folder's inbox (requests, rules, timeline marks, the Matrix session and sync token in ``kv``)
copied into an empty PostgreSQL database (:mod:`bot.inbox.migrate`).

The saved device's crypto state (nio's crypto store, its trust files, ``cross_signing.json``) is carried
too, packed into ``kv`` in the same transaction (:mod:`bot.matrix.vault`): daemons on the database, in any
state folder, are that device. ``--without-crypto`` leaves it behind (the daemons then log in as a new
device). Exit 0 done, 1 refused, 2 a bad URL or config.

The target URL comes from ``--to`` (in the command line, which every local process can read: avoid it for
a URL holding a password), ``--to-env VAR`` or ``--to-file PATH`` (its one line), else ``state.database``
(env ``PERMISSION_BOT_DATABASE_URL`` wins). It is shown only rebuilt without its password
(:mod:`bot.inbox.db.pgurl`).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the config and the database load only when the verb runs: the parser stays light
    from bot.config import Config

EXIT_REFUSED, EXIT_USAGE = 1, 2


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="state_command", metavar="ACTION", required=True)
    mig = sub.add_parser("migrate", help="copy the SQLite state folder into an empty PostgreSQL database")
    to = mig.add_mutually_exclusive_group()
    to.add_argument("--to", metavar="URL", help="the postgresql:// target (default: state.database or "
                    "PERMISSION_BOT_DATABASE_URL); its password is then in the command line: prefer --to-env "
                    "or --to-file")
    to.add_argument("--to-env", metavar="VAR", help="read the target URL from this environment variable")
    to.add_argument("--to-file", metavar="PATH", help="read the target URL from this file (one line)")
    mig.add_argument("--config", default="config.toml")
    mig.add_argument("--without-crypto", action="store_true",
                     help="leave the crypto store behind (the daemons on the database log in as a new device)")


def crypto_files(cfg: Config) -> list[Path]:
    """The crypto state under ``state.path``: nio's stores, cross_signing.json."""
    from bot.matrix.cross_signing import FILE_NAME

    state = cfg.state_dir
    found = sorted(state.glob(f"{cfg.matrix.user_id}_*.db")) if state.is_dir() else []
    return found + ([state / FILE_NAME] if (state / FILE_NAME).is_file() else [])


class CryptoCarrier:
    """The ``kv`` entry of the saved session's device, packed from the state folder (``state migrate``)."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.carried: list[str] = []  # the files packed
        self.device = ""

    def __call__(self, kv: Mapping[str, str]) -> dict[str, str]:
        import json

        from bot.inbox.record import dumps
        from bot.matrix.session import SESSION_KEY
        from bot.matrix.vault import VAULT_KEY, device_files, entry, pack

        try:
            session = json.loads(kv.get(SESSION_KEY) or "null")
        except ValueError:
            session = None
        self.device = str(session.get("device_id") or "") if isinstance(session, dict) else ""
        state, user = self.cfg.state_dir, self.cfg.matrix.user_id
        names = device_files(user, self.device)  # nio's store first
        if not self.device or not (state / names[0]).is_file():
            return {}
        self.carried = [n for n in names if (state / n).is_file()]
        return {VAULT_KEY: dumps(entry(user, self.device, pack(state, user, self.device)))}


def target_url(args: argparse.Namespace, cfg: Config) -> tuple[str, str | None, str | None]:
    """(what names the URL in messages, the URL or None, why it could not be read or None)."""
    import os

    from bot.inbox.db.url import source_key
    from bot.service.state_db import database_url

    if args.to:
        return "--to", args.to, None
    if args.to_env:
        key = f"--to-env {args.to_env}"
        return key, os.environ.get(args.to_env) or None, None if os.environ.get(args.to_env) else f"{key}: not set"
    if args.to_file:
        key = f"--to-file {args.to_file}"
        try:
            lines = [ln.strip() for ln in Path(args.to_file).read_text(encoding="utf-8").splitlines() if ln.strip()]
        except (OSError, UnicodeDecodeError) as e:
            return key, None, f"{key}: cannot read it ({type(e).__name__})"
        if len(lines) != 1:
            return key, None, f"{key}: expected one line holding the URL, found {len(lines)}"
        return key, lines[0], None
    return source_key(), database_url(cfg), None


def run(args: argparse.Namespace) -> int:
    """``state migrate``, the one action (argparse allows no other)."""
    import asyncio
    import sqlite3

    from bot.cli.config_file import load_or_exit
    from bot.cli.flags import fail
    from bot.inbox.db import DatabaseError, DatabaseUrlError, SchemaTooNew, parse
    from bot.inbox.migrate import MigrateError, migrate, summary

    cfg = load_or_exit(args.config)
    key, url, why = target_url(args, cfg)
    if why is not None:
        return fail(f"state migrate: {why}", EXIT_USAGE)
    if not url:
        return fail("state migrate: give the target with --to-env VAR, --to-file PATH or --to postgresql://... "
                    "(or set state.database)", EXIT_USAGE)
    try:
        target = parse(url, key=key)
    except DatabaseUrlError as e:
        return fail(str(e), EXIT_USAGE)
    if target.engine != "postgresql":
        return fail(f"{key}: the target must be a postgresql:// URL, not {target.shown}", EXIT_USAGE)
    from bot.cli import log_setup
    from bot.inbox.db.url import secrets_of

    log_setup.refine(cfg, secrets_of(url))  # the target's password masked too (--to, --to-env, --to-file)
    carrier = None if args.without_crypto else CryptoCarrier(cfg)
    source = cfg.state_dir / "inbox.sqlite3"
    try:
        copied = asyncio.run(migrate(source, url, carrier, key=key))
    except (MigrateError, SchemaTooNew, DatabaseError) as e:
        return fail(str(e), EXIT_REFUSED)
    except (OSError, sqlite3.Error) as e:  # the crypto store could not be read: nothing was written
        return fail(f"state migrate: cannot read the crypto store under {cfg.state_dir}: {e}", EXIT_REFUSED)
    for line in summary(copied, source, target.shown):
        print(line)
    if carrier is not None and carrier.carried:
        print(f"crypto store of device {carrier.device} carried: {', '.join(carrier.carried)}")
    left = [p.name for p in crypto_files(cfg) if carrier is None or p.name not in carrier.carried]
    if left:
        print(f"left behind (not in the database): {', '.join(left)}")
    return 0
