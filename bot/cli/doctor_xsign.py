"""doctor's cross-signing checks: the bot's identity published, its device cross-signed, and the
answerers' pinned identities (with what to do about each problem)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from typing import Any

from bot.cli.doctor import C, Login, Report, _why, call, saved_session
from bot.config import Config
from bot.matrix.cross_signing import identity_path, load_identity
from bot.matrix.crypto import fingerprint
from bot.matrix.errors import MatrixFatal
from bot.matrix.identities import PIN_KEY
from bot.matrix.signing import device_signed_by, key_of


def pins(cfg: Config) -> dict[str, str]:
    """The pinned master keys (kv ``matrix.identity.USER``) by user id."""
    db = cfg.state_dir / "inbox.sqlite3"
    if not db.is_file():
        return {}
    try:
        with contextlib.closing(sqlite3.connect(str(db), timeout=5)) as conn:
            rows = conn.execute("SELECT k, v FROM kv WHERE k LIKE ?", (PIN_KEY + "%",)).fetchall()
    except sqlite3.Error:
        return {}
    out = {}
    for k, v in rows:
        with contextlib.suppress(ValueError, AttributeError):
            out[str(k)[len(PIN_KEY):]] = str(json.loads(v)["master"])
    return out


def check_cross_signing(cfg: Config, login: Login | None, rep: Report) -> None:
    """The bot's identity (published and kept here), its device's signature, and the pinned identities."""
    if not cfg.matrix.encryption or login is None:
        return
    user = cfg.matrix.user_id
    path = identity_path(cfg.state_dir)
    status, q = call("POST", cfg.matrix.homeserver + C + "/keys/query", {"device_keys": {user: []}}, login.token)
    if status != 200 or not isinstance(q, dict):
        rep.warn(f"identity: cannot read the bot's keys ({_why(status, q)})")
        return
    master, ssk = key_of((q.get("master_keys") or {}).get(user)), key_of((q.get("self_signing_keys") or {}).get(user))
    try:
        local = load_identity(path)
    except MatrixFatal as e:
        rep.fail(f"identity: {e}", "restore the file from your copy, or `permission-bot e2ee reset-identity`")
        return
    if master is None:
        rep.ok("identity: none published yet; the bot makes and publishes one on its next start")
        return
    if local is None or local.master.public != master or local.self_signing.public != ssk:
        rep.fail(
            f"identity: {user} has a cross-signing identity (master {fingerprint(master)}) that is not in {path}",
            "set matrix.recovery_key to import it, or `permission-bot e2ee reset-identity` to replace it",
        )
        return
    if path.stat().st_mode & 0o077:
        rep.fail(f"identity: {path} is readable by others", f"chmod 600 {path}")
    else:
        rep.ok(f"identity: published, master key {fingerprint(master)} (private keys in {path}, mode 600)")
    session = saved_session(cfg)
    device = (q.get("device_keys") or {}).get(user, {}).get(session["device_id"]) if session else None
    if session is None:
        pass
    elif isinstance(device, dict) and device_signed_by(device, user, ssk):
        rep.ok(f"identity: the bot's device {session['device_id']} is cross-signed (Element shows no warning)")
    else:
        rep.fail(f"identity: the bot's device {session['device_id']} is not cross-signed",
                 "restart the bot: it signs its device on start")
    _check_pins(cfg, login, rep)


def _check_pins(cfg: Config, login: Login, rep: Report) -> None:
    pinned = pins(cfg)
    if cfg.matrix.trust != "cross-signed" or not pinned:
        return
    status, q = call("POST", cfg.matrix.homeserver + C + "/keys/query",
                     {"device_keys": {u: [] for u in pinned}}, login.token)
    published: dict[str, Any] = (q.get("master_keys") or {}) if status == 200 and isinstance(q, dict) else {}
    for user, master in sorted(pinned.items()):
        now = key_of(published.get(user))
        if now is None or now == master:
            rep.ok(f"pinned identity: {user} master {fingerprint(master)}")
        else:
            rep.warn(f"pinned identity: {user} changed identity (pinned {fingerprint(master)}, "
                     f"now {fingerprint(now)}); their answers are refused",
                     f"check with them, then `permission-bot e2ee accept-identity {user}`")
