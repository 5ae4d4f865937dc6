"""`permission-bot e2ee`: the bot's cross-signing identity and the answerers' pinned identities.

    accept-identity USER   pin USER's current cross-signing identity (after they reset it)
    reset-identity         replace the bot's identity with a new one (asks for the bot's password)

Both use the saved session in the state (``[state] path`` or ``state.database``); reset-identity logs in with the
password when there is none (a fresh state folder) and keeps the new identity in secret storage (a new recovery
key, see identity_backup.py). With the state in PostgreSQL it leaves the daemons' copy of the device alone: a new
recovery key is shown once for their config (unless matrix.recovery_key is set), and each daemon imports the new
identity from secret storage at its next start.
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
    sub = p.add_subparsers(dest="e2ee_command", metavar="ACTION", required=True)
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
    from bot.matrix import cross_signing, identity_backup
    from bot.matrix.crypto import fingerprint
    from bot.matrix.errors import MatrixFatal
    from bot.matrix.secret_storage import decode_recovery_key, encode_recovery_key
    from bot.matrix.signing import Identity
    from bot.service.state_db import database_url

    shared = bool(database_url(cfg))  # PostgreSQL: every daemon takes the new identity from secret storage
    user = cfg.matrix.user_id
    # matrix.recovery_key read first: one that is not a recovery key (ValueError) changes nothing on the homeserver
    given = decode_recovery_key(cfg.matrix.recovery_key) if cfg.matrix.recovery_key else None
    try:
        inbox, session = await _session(cfg)
        await inbox.close()
        token, device, temporary = session["access_token"], str(session.get("device_id") or ""), False
    except MatrixFatal:  # a fresh state folder (a failed start logs its device out): a device of its own
        token, device, temporary = await _login(cfg, password), "", True
    api = cross_signing.Api(cfg.matrix.homeserver, token)
    try:
        ident = Identity.generate()
        await cross_signing.upload_identity(api, user, ident, password)
        if not shared:  # on PostgreSQL the daemons' copy of the device is theirs to change: they import it
            cross_signing.save_identity(cross_signing.identity_path(cfg.state_dir), ident)
        if device:
            q = await api.query([user])
            dev = (q.get("device_keys") or {}).get(user, {}).get(device)
            if isinstance(dev, dict):
                await cross_signing.sign_device(api, user, dev, ident)
        key = given if given is not None else os.urandom(32)
        if given is not None:
            where = "with matrix.recovery_key"
        elif shared:  # no folder every daemon reads: the key is shown once, for their config
            where = (f"with a new recovery key, shown once: {encode_recovery_key(key)} ; set it as "
                     "matrix.recovery_key (or PERMISSION_BOT_MATRIX_RECOVERY_KEY) for every daemon")
        else:
            identity_backup.write_key(identity_backup.key_file(cfg.state_dir), encode_recovery_key(key))
            where = (f"with a new recovery key in {identity_backup.key_file(cfg.state_dir)}: copy it to where you "
                     "keep the password (matrix.recovery_key)")
        await identity_backup.store(api, user, ident, key)
    finally:
        if temporary:
            await api.call("POST", "/logout", {})
    restart = ("restart every daemon: each takes the new identity from secret storage with matrix.recovery_key "
               "(the database's copy of the device keeps the old one until then)") if shared else "restart the bot"
    return (f"published a new identity for {user} (master key {fingerprint(ident.master.public)}), kept in secret "
            f"storage {where}; {restart}. People who verified the bot must verify it again.")


async def _login(cfg: Config, password: str) -> str:
    """An access token of a device of its own (logged out again by the caller)."""
    from bot.matrix import cross_signing
    from bot.matrix.errors import MatrixFatal

    api = cross_signing.Api(cfg.matrix.homeserver, "")
    body = {"type": "m.login.password", "identifier": {"type": "m.id.user", "user": cfg.matrix.user_id},
            "password": password, "initial_device_display_name": "permission-bot e2ee"}
    try:
        r = await api.call("POST", "/login", body)
    except cross_signing.HttpError as e:
        raise MatrixFatal(f"e2ee reset-identity: log-in as {cfg.matrix.user_id} refused ({e})") from None
    return str(r.get("access_token") or "")


def run(args: argparse.Namespace) -> int:
    import aiohttp

    from bot.cli.config_file import load_or_exit
    from bot.cli.flags import fail
    from bot.inbox.db import DatabaseError, DatabaseUrlError
    from bot.matrix.cross_signing import HttpError
    from bot.matrix.errors import MatrixFatal

    os.umask(0o077)  # it writes into the state folder (keys, the inbox): its owner's only, as `run` does
    cfg = load_or_exit(args.config)
    import asyncio  # here, not at the top: the parser of every other command imports this module

    try:
        if args.e2ee_command == "accept-identity":
            print(asyncio.run(accept_identity(cfg, args.user)))
            return 0
        prompt = f"password of {cfg.matrix.user_id}: "
        password = getpass.getpass(prompt) if sys.stdin.isatty() else sys.stdin.readline().rstrip("\n")
        if not password:
            return fail("reset-identity needs the bot account's password", 2)
        print(asyncio.run(reset_identity(cfg, password)))
        return 0
    except (MatrixFatal, DatabaseError, DatabaseUrlError) as e:
        return fail(str(e), 1)
    except (OSError, aiohttp.ClientError) as e:
        return fail(f"cannot reach the homeserver ({e})", 1)
    except ValueError as e:  # matrix.recovery_key is not a recovery key
        return fail(f"matrix.recovery_key: {e}", 1)
    except HttpError as e:
        return fail(f"the homeserver refused ({e})", 1)
