"""doctor's encryption checks: support and the bot's device, its cross-signing identity, and the
answerers' pinned identities (with what to do about each problem)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from bot.cli.doctor.homeserver import C, Login, call, why
from bot.cli.doctor.report import Report
from bot.cli.doctor.state import Saved
from bot.config import Config, secret_source
from bot.matrix.cross_signing import Api, identity_path, import_identity, load_identity
from bot.matrix.crypto import fingerprint
from bot.matrix.errors import MatrixFatal
from bot.matrix.identities import vouching_device
from bot.matrix.signing import Identity, device_signed_by, key_of


def check_encryption_support(cfg: Config, saved: Saved, rep: Report) -> None:
    """With encryption on (the default) the daemon needs matrix-nio's e2e extra, and keeps its keys in state."""
    if not cfg.matrix.encryption:
        return
    from nio.crypto import ENCRYPTION_ENABLED

    if not ENCRYPTION_ENABLED:
        rep.fail("matrix.encryption: on, but matrix-nio's e2e extra (vodozemac) is not installed",
                 "pip install 'matrix-nio[e2e]', or set [matrix] encryption = false for an unencrypted room")
        return
    session = saved.session
    if session is None:
        rep.ok("encryption: supported; the bot's device and keys are made on its first start")
        return
    store = cfg.state_dir / f"{cfg.matrix.user_id}_{session['device_id']}.db"
    if saved.database:  # PostgreSQL: the device is the database's copy; a daemon that leads restores it
        rep.ok(f"encryption: device {session['device_id']} (its keys kept in the database, state.database)")
        return
    if not store.is_file():
        rep.warn(f"encryption: the crypto store of device {session['device_id']} is missing ({store.name})",
                 f"encrypted rooms will fail: stop the daemon and delete {cfg.state_dir} to log in as a new device")
        return
    key = saved.crypto.get("ed25519") if isinstance(saved.crypto, dict) else None
    shown = f", ed25519 {fingerprint(key)}" if isinstance(key, str) else ""
    rep.ok(f"encryption: device {session['device_id']}{shown} (compare with the bot's session in your client)")


def check_cross_signing(cfg: Config, saved: Saved, login: Login | None, rep: Report) -> None:
    """The bot's identity (published and kept here), its device's signature, and the pinned identities."""
    if not cfg.matrix.encryption or login is None:
        return
    user = cfg.matrix.user_id
    path = identity_path(cfg.state_dir)
    status, q = call(cfg, "POST", C + "/keys/query", {"device_keys": {user: []}}, login.token)
    if status != 200 or not isinstance(q, dict):
        rep.warn(f"identity: cannot read the bot's keys ({why(status, q)})")
        return
    master, ssk = key_of((q.get("master_keys") or {}).get(user)), key_of((q.get("self_signing_keys") or {}).get(user))
    try:
        local = _database_identity(saved) if saved.database else load_identity(path)
    except MatrixFatal as e:
        rep.fail(f"identity: {e}", "restore the file from your copy, or `permission-bot e2ee reset-identity`")
        return
    if saved.database:
        path = Path("the database's copy of the device (state.database)")
    if master is None:
        rep.ok("identity: none published yet; the bot makes and publishes one on its next start")
        return
    if local is None or local.master.public != master or local.self_signing.public != ssk:
        if cfg.matrix.recovery_key:  # what `run` does then: import it (here only read, nothing saved)
            _check_import(cfg, login, master, ssk, path, rep)
            return
        rep.fail(f"identity: {user} has a cross-signing identity (master {fingerprint(master)}) that is not in {path}",
                 "set matrix.recovery_key to import it, or `permission-bot e2ee reset-identity` to replace it")
        return
    if not saved.database and path.stat().st_mode & 0o077:
        rep.fail(f"identity: {path} is readable by others", f"chmod 600 {path}")
    else:
        where = f"{path}, mode 600" if not saved.database else str(path)
        rep.ok(f"identity: published, master key {fingerprint(master)} (private keys in {where})")
    session = saved.session
    device = (q.get("device_keys") or {}).get(user, {}).get(session["device_id"]) if session else None
    if session is not None and isinstance(device, dict) and device_signed_by(device, user, ssk):
        rep.ok(f"identity: the bot's device {session['device_id']} is cross-signed (Element shows no warning)")
    elif session is not None:
        rep.fail(f"identity: the bot's device {session['device_id']} is not cross-signed",
                 "restart the bot: it signs its device on start")
    _check_pins(cfg, saved, login, rep)


def _check_import(cfg: Config, login: Login, master: str, ssk: str | None, path: Path, rep: Report) -> None:
    """The account's identity is not in the state: does ``matrix.recovery_key`` import it, as `run` will."""
    user, source = cfg.matrix.user_id, secret_source("recovery_key")
    try:
        asyncio.run(import_identity(Api(cfg.matrix.homeserver, login.token), user, cfg.matrix.recovery_key or "",
                                    master, ssk))
    except MatrixFatal as e:
        rep.fail(f"identity: {str(e).replace('matrix.recovery_key', source)}",
                 f"set {source} to the bot's recovery key, or `permission-bot e2ee reset-identity` to replace it")
        return
    rep.ok(f"identity: {user}'s identity (master {fingerprint(master)}) is not in {path} yet; {source} opens its "
           "secret storage: the bot imports it on its next start")


def _database_identity(saved: Saved) -> Identity | None:
    """The bot's identity from the database's copy of its device (PostgreSQL); None when there is none."""
    if saved.identity is None:
        return None
    try:
        return Identity.from_json(json.loads(saved.identity))
    except ValueError as e:
        raise MatrixFatal(f"the database's copy of the bot's cross-signing keys is damaged ({e})") from None


def _check_pins(cfg: Config, saved: Saved, login: Login, rep: Report) -> None:
    pinned = saved.pins
    if cfg.matrix.trust != "cross-signed" or not pinned:
        return
    status, q = call(cfg, "POST", C + "/keys/query", {"device_keys": {u: [] for u in pinned}}, login.token)
    published: dict[str, Any] = (q.get("master_keys") or {}) if status == 200 and isinstance(q, dict) else {}
    for user, master in sorted(pinned.items()):
        now = key_of(published.get(user))
        if not master:  # seen with devices but no identity: one that appears is refused until accepted
            signer = vouching_device(user, published.get(user), saved.known.get(user, {}))
            if now is None:
                rep.ok(f"pinned identity: {user} has none yet (one that appears must be accepted, unless a device "
                       "of theirs the bot saw signs it)")
            elif signer:
                rep.ok(f"pinned identity: {user} published an identity ({fingerprint(now)}) signed by their device "
                       f"{signer}, which the bot saw before it; pinned at the daemon's next key query")
            else:
                rep.warn(f"pinned identity: {user} published an identity ({fingerprint(now)}) after the bot saw them "
                         "without one; their answers are refused",
                         f"check with them, then `permission-bot e2ee accept-identity {user}`")
        elif now is None or now == master:
            rep.ok(f"pinned identity: {user} master {fingerprint(master)}")
        else:
            rep.warn(f"pinned identity: {user} changed identity (pinned {fingerprint(master)}, "
                     f"now {fingerprint(now)}); their answers are refused",
                     f"check with them, then `permission-bot e2ee accept-identity {user}`")
