"""`permission-bot state migrate --to URL [--config PATH] [--without-crypto]`: a SQLite state folder's inbox
(requests, rules, timeline marks, the Matrix session and sync token in ``kv``) copied into an empty
PostgreSQL database (:mod:`bot.inbox.migrate`).

nio's crypto store and ``cross_signing.json`` are not carried yet: with ``[matrix] encryption`` on and either
in the folder, the command refuses (exit 1) unless ``--without-crypto`` says to leave them behind (the
database then serves ``encryption = false`` deployments). Exit 0 done, 1 refused, 2 a bad URL or config.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the config and the database load only when the verb runs: the parser stays light
    from bot.config import Config

EXIT_REFUSED, EXIT_USAGE = 1, 2


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="state_command", metavar="ACTION")
    sub.required = True
    mig = sub.add_parser("migrate", help="copy the SQLite state folder into an empty PostgreSQL database")
    mig.add_argument("--to", metavar="URL", help="the postgresql:// target (default: state.database or "
                     "PERMISSION_BOT_DATABASE_URL)")
    mig.add_argument("--config", default="config.toml")
    mig.add_argument("--without-crypto", action="store_true",
                     help="leave the crypto store behind (the database serves encryption = false deployments)")


def crypto_files(cfg: Config) -> list[Path]:
    """The crypto state under ``state.path`` the database does not hold yet: nio's store, cross_signing.json."""
    from bot.matrix.cross_signing import FILE_NAME

    state = cfg.state_dir
    found = sorted(state.glob(f"{cfg.matrix.user_id}_*.db")) if state.is_dir() else []
    return found + ([state / FILE_NAME] if (state / FILE_NAME).is_file() else [])


def _fail(message: str, code: int) -> int:
    print(f"permission-bot: {message}", file=sys.stderr, flush=True)
    return code


def migrate(args: argparse.Namespace) -> int:
    import asyncio

    from bot.cli.config_file import load_or_exit
    from bot.inbox.db import DatabaseError, DatabaseUrlError, SchemaTooNew, parse
    from bot.inbox.migrate import MigrateError, migrate, summary
    from bot.service.state_db import database_url

    cfg = load_or_exit(args.config)
    key, url = ("--to", args.to) if args.to else ("state.database", database_url(cfg))
    if not url:
        return _fail("state migrate: give the target with --to postgresql://... (or set state.database)", EXIT_USAGE)
    try:
        target = parse(url, key=key)
    except DatabaseUrlError as e:
        return _fail(str(e), EXIT_USAGE)
    if target.engine != "postgresql":
        return _fail(f"{key}: the target must be a postgresql:// URL, not {target.shown}", EXIT_USAGE)
    crypto = crypto_files(cfg)
    if crypto and cfg.matrix.encryption and not args.without_crypto:
        return _fail(
            f"state migrate: {', '.join(p.name for p in crypto)} (the crypto store) is not carried into the database "
            "yet; the migrated database serves [matrix] encryption = false deployments: set that, or pass "
            "--without-crypto to migrate the rest",
            EXIT_REFUSED,
        )
    source = cfg.state_dir / "inbox.sqlite3"
    try:
        copied = asyncio.run(migrate(source, url))
    except (MigrateError, SchemaTooNew, DatabaseError) as e:
        return _fail(str(e), EXIT_REFUSED)
    for line in summary(copied, source, target.shown):
        print(line)
    if crypto:
        print(f"left behind (not in the database): {', '.join(p.name for p in crypto)}")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.state_command == "migrate":
        return migrate(args)
    return EXIT_USAGE
