"""doctor's view of the homeserver: reachable, speaking Matrix, and a working login for the other checks."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from bot.cli.doctor.report import Report
from bot.cli.doctor.state import Saved
from bot.config import ENV_PASSWORD, Config, secret_source
from bot.util import jsonhttp
from bot.util.plainhttp import speaks_plain_http

TIMEOUT = 10.0
C = "/_matrix/client/v3"


@dataclass
class Login:
    """A working access token for the checks, and whether doctor must log it out again."""

    token: str
    temporary: bool


def call(cfg: Config, method: str, path: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
    """One client-server API request (``path`` after the homeserver URL); ``jsonhttp.Unreachable`` when
    nothing answers."""
    return jsonhttp.call(method, cfg.matrix.homeserver + path, body, token=token, timeout=TIMEOUT)


def why(status: int, body: Any) -> str:
    """``403 M_FORBIDDEN: reason`` from a Matrix error response."""
    if isinstance(body, dict) and body.get("errcode"):
        msg = str(body.get("error", ""))[:160]
        return f"{status} {body['errcode']}" + (f": {msg}" if msg else "")
    return f"HTTP {status}"


def check_homeserver(cfg: Config, rep: Report) -> bool:
    hs = cfg.matrix.homeserver
    try:
        status, body = call(cfg, "GET", "/_matrix/client/versions")
    except jsonhttp.Unreachable as e:
        if speaks_plain_http(hs):
            rep.fail(f"homeserver: the TLS handshake with {hs} failed (the port answers plain HTTP)",
                     "use http:// for a plain-HTTP port, or the server's TLS port")
            return False
        rep.fail(f"homeserver: cannot reach {hs} ({e})", "check matrix.homeserver and that the server is up")
        return False
    versions = body.get("versions") if isinstance(body, dict) else None
    if status != 200 or not isinstance(versions, list) or not versions:
        rep.fail(f"homeserver: {hs}/_matrix/client/versions answered {why(status, body)}, not Matrix",
                 "matrix.homeserver must be the client-server API base URL (e.g. https://matrix.example.org)")
        return False
    rep.ok(f"homeserver: {hs} answers (Matrix {versions[-1]})")
    return True


def check_login(cfg: Config, saved: Saved, rep: Report) -> Login | None:
    m = cfg.matrix
    if saved.session:
        status, body = call(cfg, "GET", C + "/account/whoami", token=saved.session["access_token"])
        if status == 200 and isinstance(body, dict) and body.get("user_id") == m.user_id:
            rep.ok(f"login: the daemon's saved session for {m.user_id} (device {saved.session['device_id']}) is valid")
            return Login(saved.session["access_token"], temporary=False)
        rep.fail(
            f"login: the saved session in {cfg.state_dir} is refused ({why(status, body)})",
            f"stop the daemon and delete {cfg.state_dir / 'inbox.sqlite3'} (or the whole state folder) "
            "so it logs in afresh",
        )
        return None
    if m.access_token:
        status, body = call(cfg, "GET", C + "/account/whoami", token=m.access_token)
        who = body.get("user_id") if isinstance(body, dict) else None
        if status != 200:
            rep.fail(f"login: matrix.access_token is refused ({why(status, body)})", "set a current access token")
            return None
        if who != m.user_id:
            rep.fail(f"login: matrix.access_token belongs to {who}, not {m.user_id}", "fix matrix.user_id or the token")
            return None
        rep.ok(f"login: matrix.access_token is valid for {m.user_id}")
        return Login(m.access_token, temporary=False)
    body_in = {"type": "m.login.password", "identifier": {"type": "m.id.user", "user": m.user_id},
               "password": m.password or "", "initial_device_display_name": "permission-bot doctor"}
    status, body = call(cfg, "POST", C + "/login", body_in)
    token = body.get("access_token") if isinstance(body, dict) else None
    if status == 429 or (isinstance(body, dict) and body.get("errcode") == "M_LIMIT_EXCEEDED"):  # a rate limit
        wait = (body.get("retry_after_ms") or 0) / 1000 if isinstance(body, dict) else 0
        rep.fail(
            f"login: rate-limited by the homeserver ({why(status, body)}; retry after {wait:g} s), "
            "not a wrong password",
            "wait and run doctor again; once the daemon has logged in, doctor uses its saved session",
        )
        return None
    if status != 200 or not isinstance(token, str):
        rep.fail(f"login: as {m.user_id} with {secret_source('password')} failed ({why(status, body)})",
                 f"check matrix.user_id and matrix.password (or {ENV_PASSWORD})")
        return None
    rep.ok(f"login: {m.user_id} logs in with {secret_source('password')} (doctor's own device, logged out again)")
    return Login(token, temporary=True)


def logout(cfg: Config, login: Login) -> None:
    with contextlib.suppress(jsonhttp.Unreachable):
        call(cfg, "POST", C + "/logout", {}, login.token)
