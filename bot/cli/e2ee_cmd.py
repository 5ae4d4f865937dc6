"""`permission-bot e2ee`: the bot's cross-signing identity and the answerers' pinned identities.

    accept-identity USER   pin USER's current cross-signing identity (after they reset it)
    reset-identity         replace the bot's identity with a new one (asks for the bot's password)

Both use the saved session in ``[state] path`` (the daemon must have logged in once).
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the Matrix side loads only when an e2ee verb runs: other commands start fast
    from bot.config import Config
    from bot.inbox.store import Inbox


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="e2ee_command", metavar="ACTION")
    sub.required = True
    acc = sub.add_parser("accept-identity", help="accept USER's new cross-signing identity (pin it)")
    acc.add_argument("user", help="the Matrix id, e.g. @alice:example.org")
    acc.add_argument("--config", default="config.toml")
    reset = sub.add_parser("reset-identity", help="replace the bot's cross-signing identity (asks for the password)")
    reset.add_argument("--config", default="config.toml")


async def _session(cfg: Config) -> tuple[Inbox, dict[str, Any]]:
    from bot.inbox.store import Inbox
    from bot.matrix.errors import MatrixFatal
    from bot.service.state_db import new_holder, state_database

    inbox = Inbox(state_database(cfg, new_holder()))  # SQLite under state.path, or [state] database
    await inbox.open()
    session = await inbox.get_json("matrix.session")
    if not isinstance(session, dict) or not session.get("access_token"):
        await inbox.close()
        raise MatrixFatal(f"{cfg.state_dir}: no saved Matrix session; start the bot once first")
    return inbox, session


async def accept_identity(cfg: Config, user: str) -> str:
    from bot.matrix import cross_signing
    from bot.matrix.crypto import fingerprint
    from bot.matrix.errors import MatrixFatal
    from bot.matrix.identities import PIN_KEY
    from bot.matrix.signing import key_of

    inbox, session = await _session(cfg)
    try:
        api = cross_signing.Api(cfg.matrix.homeserver, session["access_token"])
        try:
            q = await api.query([user])
        except cross_signing.HttpError as e:
            raise MatrixFatal(f"cannot read {user}'s keys from the homeserver ({e})") from None
        master = key_of((q.get("master_keys") or {}).get(user))
        if not master:
            raise MatrixFatal(f"{user} has no cross-signing identity on the homeserver; nothing to accept")
        await inbox.set_json(PIN_KEY + user, {"master": master})
    finally:
        await inbox.close()
    return f"accepted {user}'s identity (master key {fingerprint(master)}); their verified devices may answer again"


async def reset_identity(cfg: Config, password: str) -> str:
    from bot.matrix import cross_signing
    from bot.matrix.crypto import fingerprint
    from bot.matrix.errors import MatrixFatal
    from bot.matrix.signing import Identity
    from bot.service.state_db import database_url

    if database_url(cfg):
        raise MatrixFatal(
            "e2ee reset-identity: with the state in PostgreSQL the bot's cross-signing keys are kept in the "
            "database's copy of its device, which this command cannot change yet; not done"
        )
    inbox, session = await _session(cfg)
    await inbox.close()
    user, device = cfg.matrix.user_id, str(session.get("device_id") or "")
    api = cross_signing.Api(cfg.matrix.homeserver, session["access_token"])
    ident = Identity.generate()
    await cross_signing.upload_identity(api, user, ident, password)
    cross_signing.save_identity(cross_signing.identity_path(cfg.state_dir), ident)
    q = await api.query([user])
    dev = (q.get("device_keys") or {}).get(user, {}).get(device)
    if isinstance(dev, dict):
        await cross_signing.sign_device(api, user, dev, ident)
    return (f"published a new identity for {user} (master key {fingerprint(ident.master.public)}); restart the bot. "
            "People who verified the bot must verify it again.")


def run(args: argparse.Namespace) -> int:
    import aiohttp

    from bot.cli.config_file import load_or_exit
    from bot.inbox.db import DatabaseError, DatabaseUrlError
    from bot.matrix.errors import MatrixFatal

    os.umask(0o077)  # it writes into the state folder (keys, the inbox): its owner's only, as `run` does
    cfg = load_or_exit(args.config)
    import asyncio  # here, not at the top: the parser of every other command imports this module

    try:
        if args.e2ee_command == "accept-identity":
            print(asyncio.run(accept_identity(cfg, args.user)))
            return 0
        if sys.stdin.isatty():
            password = getpass.getpass(f"password of {cfg.matrix.user_id}: ")
        else:
            password = sys.stdin.readline().rstrip("\n")
        if not password:
            print("permission-bot: reset-identity needs the bot account's password", file=sys.stderr)
            return 2
        print(asyncio.run(reset_identity(cfg, password)))
        return 0
    except (MatrixFatal, DatabaseError, DatabaseUrlError) as e:
        print(f"permission-bot: {e}", file=sys.stderr)
        return 1
    except (OSError, aiohttp.ClientError) as e:
        print(f"permission-bot: cannot reach the homeserver ({e})", file=sys.stderr)
        return 1
