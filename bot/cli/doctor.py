"""`permission-bot doctor --config PATH`: check a config against the homeserver, the room and this machine.

Checks, in order: the config, the state folder, encryption support (and the bot's device), the
homeserver, the login, the bot's cross-signing identity and pinned identities (doctor_xsign.py), the
room (joined or invited, power levels, encryption), the answerers and the API listen address. One
line per check: ``ok   ...``, ``WARN ...`` or ``FAIL ... -> what to do``; exit 0 when nothing failed,
1 otherwise. Uses the daemon's saved session when there is one (no new device); else logs in with
the password and logs that device out again. Secrets are never printed.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import sqlite3
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from bot.config import ENV_API_TOKEN, ENV_PASSWORD, Config, ConfigError, load_config
from bot.matrix.client import CRYPTO_KEY, SESSION_KEY
from bot.matrix.crypto import fingerprint
from bot.matrix.room import INFINITE, RoomState

TIMEOUT = 10.0
C = "/_matrix/client/v3"


class Unreachable(Exception):
    """The server could not be reached at all (connection refused, DNS, timeout)."""


@dataclass
class Report:
    """Prints check lines and remembers whether any failed."""

    failed: bool = False
    lines: list[str] = field(default_factory=list)

    def _emit(self, line: str) -> None:
        self.lines.append(line)
        print(line, flush=True)

    def ok(self, what: str) -> None:
        self._emit(f"ok   {what}")

    def warn(self, what: str, todo: str | None = None) -> None:
        self._emit(f"WARN {what}" + (f" -> {todo}" if todo else ""))

    def fail(self, what: str, todo: str) -> None:
        self.failed = True
        self._emit(f"FAIL {what} -> {todo}")


def call(method: str, url: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
    """One JSON request: (status, parsed body or None). Raises Unreachable when nothing answered."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
            raw = r.read()
            status = r.status
    except urllib.error.HTTPError as e:
        raw, status = e.read(), e.code
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", None) or e
        raise Unreachable(str(reason)) from None
    try:
        return status, json.loads(raw) if raw.strip() else None
    except ValueError:
        return status, None


def _why(status: int, body: Any) -> str:
    """``403 M_FORBIDDEN: reason`` from a Matrix error response."""
    if isinstance(body, dict) and body.get("errcode"):
        msg = str(body.get("error", ""))[:160]
        return f"{status} {body['errcode']}" + (f": {msg}" if msg else "")
    return f"HTTP {status}"


def _q(s: str) -> str:
    return urllib.parse.quote(s, safe="")


# --- config and state --------------------------------------------------------------------------------


def check_config(path: str, rep: Report) -> Config | None:
    try:
        cfg = load_config(path)
    except ConfigError as e:
        rep.fail(f"config: {e}", f"fix {path} (see config.example.toml)")
        return None
    rep.ok(f"config: {path} (homeserver {cfg.matrix.homeserver}, bot {cfg.matrix.user_id}, room {cfg.matrix.room})")
    if not cfg.api.token:
        rep.warn(
            "api.token: not set, so every mutating API route answers 401",
            f"set api.token or {ENV_API_TOKEN}",
        )
    return cfg


def check_state(cfg: Config, rep: Report) -> None:
    path = cfg.state_dir.resolve()
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        rep.fail(f"state: {path}: {probe} is not a folder", "point state.path at a folder")
    elif not os.access(probe, os.W_OK | os.X_OK):
        rep.fail(f"state: {path} is not writable by this user", f"fix the permissions of {probe} or state.path")
    elif probe == path:
        rep.ok(f"state: {path} (writable)")
    else:
        rep.ok(f"state: {path} (created on first start)")


def _kv(cfg: Config, key: str) -> Any:
    """One JSON value of the daemon's kv table (state/inbox.sqlite3), or None."""
    db = cfg.state_dir / "inbox.sqlite3"
    if not db.is_file():
        return None
    try:
        with contextlib.closing(sqlite3.connect(str(db), timeout=5)) as conn:
            row = conn.execute("SELECT v FROM kv WHERE k=?", (key,)).fetchone()
    except sqlite3.Error:
        return None
    try:
        return json.loads(row[0]) if row else None
    except ValueError:
        return None


def saved_session(cfg: Config) -> dict[str, str] | None:
    """The daemon's saved Matrix session for this bot (kv ``matrix.session``), if any."""
    saved = _kv(cfg, SESSION_KEY)
    if not isinstance(saved, dict) or saved.get("user_id") != cfg.matrix.user_id or not saved.get("access_token"):
        return None
    return {k: str(saved.get(k) or "") for k in ("user_id", "device_id", "access_token")}


def check_encryption_support(cfg: Config, rep: Report) -> None:
    """With encryption on (the default) the daemon needs matrix-nio's e2e extra, and keeps its keys in state."""
    if not cfg.matrix.encryption:
        return
    from nio.crypto import ENCRYPTION_ENABLED

    if not ENCRYPTION_ENABLED:
        rep.fail(
            "matrix.encryption: on, but matrix-nio's e2e extra (vodozemac) is not installed",
            "pip install 'matrix-nio[e2e]', or set [matrix] encryption = false for an unencrypted room",
        )
        return
    session = saved_session(cfg)
    crypto = _kv(cfg, CRYPTO_KEY)
    if session is None:
        rep.ok("encryption: supported; the bot's device and keys are made on its first start")
        return
    store = cfg.state_dir / f"{cfg.matrix.user_id}_{session['device_id']}.db"
    if not store.is_file():
        rep.warn(
            f"encryption: the crypto store of device {session['device_id']} is missing ({store.name})",
            f"encrypted rooms will fail: stop the daemon and delete {cfg.state_dir} to log in as a new device",
        )
        return
    key = crypto.get("ed25519") if isinstance(crypto, dict) else None
    shown = f", ed25519 {fingerprint(key)}" if isinstance(key, str) else ""
    rep.ok(f"encryption: device {session['device_id']}{shown} (compare with the bot's session in your client)")


# --- the homeserver and the login ----------------------------------------------------------------------


def check_homeserver(cfg: Config, rep: Report) -> bool:
    hs = cfg.matrix.homeserver
    try:
        status, body = call("GET", hs + "/_matrix/client/versions")
    except Unreachable as e:
        rep.fail(f"homeserver: cannot reach {hs} ({e})", "check matrix.homeserver and that the server is up")
        return False
    versions = body.get("versions") if isinstance(body, dict) else None
    if status != 200 or not isinstance(versions, list) or not versions:
        rep.fail(
            f"homeserver: {hs}/_matrix/client/versions answered {_why(status, body)}, not Matrix",
            "matrix.homeserver must be the client-server API base URL (e.g. https://matrix.example.org)",
        )
        return False
    rep.ok(f"homeserver: {hs} answers (Matrix {versions[-1]})")
    return True


@dataclass
class Login:
    """A working access token for the checks, and whether doctor must log it out again."""

    token: str
    temporary: bool


def _whoami(cfg: Config, token: str) -> tuple[int, Any]:
    return call("GET", cfg.matrix.homeserver + C + "/account/whoami", token=token)


def check_login(cfg: Config, rep: Report) -> Login | None:
    m = cfg.matrix
    saved = saved_session(cfg)
    if saved:
        status, body = _whoami(cfg, saved["access_token"])
        if status == 200 and isinstance(body, dict) and body.get("user_id") == m.user_id:
            rep.ok(f"login: the daemon's saved session for {m.user_id} (device {saved['device_id']}) is valid")
            return Login(saved["access_token"], temporary=False)
        rep.fail(
            f"login: the saved session in {cfg.state_dir} is refused ({_why(status, body)})",
            f"stop the daemon and delete {cfg.state_dir / 'inbox.sqlite3'} (or the whole state folder) "
            "so it logs in afresh",
        )
        return None
    if m.access_token:
        status, body = _whoami(cfg, m.access_token)
        who = body.get("user_id") if isinstance(body, dict) else None
        if status != 200:
            rep.fail(f"login: matrix.access_token is refused ({_why(status, body)})", "set a current access token")
            return None
        if who != m.user_id:
            rep.fail(f"login: matrix.access_token belongs to {who}, not {m.user_id}", "fix matrix.user_id or the token")
            return None
        rep.ok(f"login: matrix.access_token is valid for {m.user_id}")
        return Login(m.access_token, temporary=False)
    body_in = {
        "type": "m.login.password",
        "identifier": {"type": "m.id.user", "user": m.user_id},
        "password": m.password or "",
        "initial_device_display_name": "permission-bot doctor",
    }
    status, body = call("POST", m.homeserver + C + "/login", body_in)
    token = body.get("access_token") if isinstance(body, dict) else None
    if status != 200 or not isinstance(token, str):
        rep.fail(
            f"login: as {m.user_id} with matrix.password failed ({_why(status, body)})",
            f"check matrix.user_id and matrix.password (or {ENV_PASSWORD})",
        )
        return None
    rep.ok(f"login: {m.user_id} logs in with matrix.password (doctor's own device, logged out again)")
    return Login(token, temporary=True)


def logout(cfg: Config, login: Login) -> None:
    with contextlib.suppress(Unreachable):
        call("POST", cfg.matrix.homeserver + C + "/logout", {}, login.token)


# --- the room ----------------------------------------------------------------------------------------


def _resolve(cfg: Config, token: str, rep: Report) -> str | None:
    room = cfg.matrix.room
    if not room.startswith("#"):
        return room
    status, body = call("GET", cfg.matrix.homeserver + C + f"/directory/room/{_q(room)}", token=token)
    rid = body.get("room_id") if isinstance(body, dict) else None
    if status != 200 or not isinstance(rid, str):
        rep.fail(f"room: the alias {room} does not resolve ({_why(status, body)})", "fix matrix.room")
        return None
    rep.ok(f"room: {room} resolves to {rid}")
    return rid


def _invite_state(cfg: Config, token: str, room_id: str) -> list[dict[str, Any]] | None:
    """The stripped state of a pending invite to ``room_id``, or None when there is no invite."""
    flt = {
        "room": {"rooms": [room_id], "timeline": {"limit": 0}, "ephemeral": {"types": []}},
        "presence": {"types": []},
        "account_data": {"types": []},
    }
    path = C + "/sync?timeout=0&filter=" + _q(json.dumps(flt, separators=(",", ":")))
    status, body = call("GET", cfg.matrix.homeserver + path, token=token)
    if status != 200 or not isinstance(body, dict):
        return None
    invite = body.get("rooms", {}).get("invite", {}).get(room_id)
    if not isinstance(invite, dict):
        return None
    events = invite.get("invite_state", {}).get("events", [])
    return [e for e in events if isinstance(e, dict)] if isinstance(events, list) else []


def _needed(power_levels: dict[str, Any], event_type: str) -> int:
    events = power_levels.get("events")
    if isinstance(events, dict) and isinstance(events.get(event_type), int):
        return int(events[event_type])
    default = power_levels.get("events_default", 0)
    return default if isinstance(default, int) else 0


def _level(n: int) -> str:
    return "unlimited (room creator)" if n >= INFINITE else str(n)


def _encryption_verdict(cfg: Config, encrypted: bool, rep: Report) -> None:
    if not encrypted:
        rep.ok("room encryption: off (prompts and answers travel as plain events)")
    elif cfg.matrix.encryption:
        rep.ok(f"room encryption: on (the bot encrypts and decrypts; trust {cfg.matrix.trust})")
    else:
        rep.fail(
            "room encryption: on, but [matrix] encryption = false: the bot would post nothing there",
            "set [matrix] encryption = true (the default), or use an unencrypted station room",
        )


@dataclass
class Room:
    """The station room as the bot sees it once joined."""

    room_id: str
    state: RoomState
    membership: dict[str, str]


def check_room(cfg: Config, login: Login, rep: Report) -> Room | None:
    """Membership, power levels and encryption; the room id and its state when the bot is joined."""
    bot = cfg.matrix.user_id
    room_id = _resolve(cfg, login.token, rep)
    if room_id is None:
        return None
    status, body = call("GET", cfg.matrix.homeserver + C + "/joined_rooms", token=login.token)
    joined = isinstance(body, dict) and room_id in body.get("joined_rooms", [])
    if not joined:
        stripped = _invite_state(cfg, login.token, room_id)
        if stripped is None:
            rep.fail(
                f"room: {bot} is neither joined to nor invited into {room_id}",
                f"invite {bot} into the station room (the daemon accepts it on start), or fix matrix.room",
            )
            return None
        rep.ok(f"room: {bot} is invited into {room_id} (the daemon accepts the invite on start)")
        _encryption_verdict(cfg, any(e.get("type") == "m.room.encryption" for e in stripped), rep)
        rep.warn(
            "room power levels: readable only once the bot has joined", "run doctor again after the daemon started"
        )
        return None
    status, state = call("GET", cfg.matrix.homeserver + C + f"/rooms/{_q(room_id)}/state", token=login.token)
    if status != 200 or not isinstance(state, list):
        rep.fail(f"room: cannot read the state of {room_id} ({_why(status, state)})", "check the bot's membership")
        return None
    rs = RoomState()
    membership: dict[str, str] = {}
    for ev in state:
        rs.apply(ev)
        if isinstance(ev, dict) and ev.get("type") == "m.room.member" and isinstance(ev.get("content"), dict):
            membership[str(ev.get("state_key"))] = str(ev["content"].get("membership"))
    rep.ok(f"room: {bot} is joined to {room_id} ({len(rs.members)} member(s))")
    have = rs.power_of(bot)
    needs = {t: _needed(rs.power_levels, t) for t in ("m.room.message", "m.reaction", "m.room.redaction")}
    if not cfg.prompts.seed_reactions:
        needs.pop("m.reaction")
    short = {t: n for t, n in needs.items() if have < n}
    what = ", ".join(f"{t} {n}" for t, n in needs.items())
    if short:
        rep.fail(
            f"room power: the bot has {_level(have)}, below what it sends ({what})",
            f"raise {bot}'s power level in the room to {max(short.values())}",
        )
    else:
        rep.ok(f"room power: the bot has {_level(have)}; it needs {what}")
    _encryption_verdict(cfg, rs.encrypted, rep)
    return Room(room_id, rs, membership)


# --- the answerers -------------------------------------------------------------------------------------


def check_answerers(cfg: Config, login: Login | None, room: Room | None, rep: Report) -> None:
    users = cfg.answerers.users
    min_pl = cfg.answerers.min_power_level
    if not users and min_pl is None:
        rep.fail(
            "answerers: nobody may answer prompts",
            "list people in answerers.users or set answerers.min_power_level",
        )
        return
    rs = room.state if room else None
    reply_needs = _needed(rs.power_levels, "m.room.message") if rs else 0
    can_answer: list[str] = []
    for user in users:
        if login is None:
            break
        try:
            status, body = call("GET", cfg.matrix.homeserver + C + f"/profile/{_q(user)}", token=login.token)
        except Unreachable as e:
            rep.warn(f"answerers: cannot look up {user} ({e})")
            continue
        if status == 404:
            rep.fail(f"answerers: {user} does not exist ({_why(status, body)})", "fix answerers.users")
            continue
        if status != 200:
            rep.warn(f"answerers: cannot look up {user} ({_why(status, body)})")
            continue
        if rs is None:
            rep.ok(f"answerers: {user} exists")
            continue
        power = rs.power_of(user)
        member = room.membership.get(user) if room else None
        if member == "invite":
            rep.warn(
                f"answerers: {user} is invited but has not joined the room yet", f"ask {user} to accept the invite"
            )
        elif user not in rs.members:
            rep.warn(f"answerers: {user} exists but is not in the room", f"invite {user} into the station room")
        elif power < reply_needs:
            rep.warn(
                f"answerers: {user} has power {_level(power)}, below the {reply_needs} needed to reply",
                f"raise {user}'s power level",
            )
        else:
            can_answer.append(user)
            rep.ok(f"answerers: {user} exists, has joined, power {_level(power)}")
    if min_pl is not None and rs is not None:
        qualified = [u for u in sorted(rs.members) if u != cfg.matrix.user_id and rs.power_of(u) >= min_pl]
        if qualified:
            can_answer += qualified
            rep.ok(f"answerers: min_power_level {min_pl}: {len(qualified)} member(s) qualify")
        else:
            rep.warn(f"answerers: min_power_level {min_pl}: no member of the room has that much power")
    if rs is not None and not can_answer:
        rep.fail(
            "answerers: nobody in the room can answer prompts right now",
            "invite an answerer into the station room, or adjust answerers.users / min_power_level",
        )


# --- the API address -----------------------------------------------------------------------------------


def check_listen(cfg: Config, rep: Report) -> None:
    host, port = cfg.api.host, cfg.api.port
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    err: OSError | None = None
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
    except OSError as e:
        err = e
    except UnicodeError as e:  # a host name IDNA cannot encode
        err = OSError(str(e))
    exposed = host not in ("127.0.0.1", "::1", "localhost")
    if err is None:
        rep.ok(f"api: {cfg.api.listen} is free for the daemon to bind")
    elif err.errno == errno.EADDRINUSE:
        probe = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
        netloc = f"[{probe}]" if ":" in probe else probe
        try:
            status, body = call("GET", f"http://{netloc}:{port}/healthz")
        except Unreachable:
            status, body = 0, None
        if status == 200 and isinstance(body, dict) and body.get("ok") is True:
            state = "connected to Matrix" if body.get("matrix_ready") else "not ready yet"
            rep.ok(f"api: {cfg.api.listen} is served by a running permission-bot daemon ({state})")
        else:
            rep.fail(f"api: {cfg.api.listen} is taken by another program", "stop it or choose another api.listen")
    else:
        rep.fail(f"api: cannot bind {cfg.api.listen} ({err.strerror or err})", "use an address of this machine")
    if exposed:
        rep.warn(
            f"api: {cfg.api.listen} is reachable from other machines; reads need no token",
            "keep it on loopback, or behind a firewall or a TLS proxy (in a container, publish it to 127.0.0.1)",
        )


# --- all of it -----------------------------------------------------------------------------------------


def run(config_path: str) -> int:
    """Check the config, the homeserver, the login, the room, the answerers and the API address."""
    rep = Report()
    cfg = check_config(config_path, rep)
    if cfg is None:
        return 1
    check_state(cfg, rep)
    check_encryption_support(cfg, rep)
    login: Login | None = None
    room: Room | None = None
    try:
        if check_homeserver(cfg, rep):
            login = check_login(cfg, rep)
            if login is not None:
                from bot.cli.doctor_xsign import check_cross_signing

                check_cross_signing(cfg, login, rep)
                room = check_room(cfg, login, rep)
            else:
                rep.warn("room: not checked (no working login)")
        check_answerers(cfg, login, room, rep)
    except Unreachable as e:
        rep.fail(f"homeserver: stopped answering ({e})", "check the homeserver and run doctor again")
    finally:
        if login is not None and login.temporary:
            logout(cfg, login)
    check_listen(cfg, rep)
    from bot.harness.check import check_harnesses

    check_harnesses(cfg, rep)
    sys.stdout.flush()
    return 1 if rep.failed else 0
