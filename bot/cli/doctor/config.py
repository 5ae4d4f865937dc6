"""doctor's checks of this machine: the config file, the state folder and the API address."""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Callable, Mapping

from bot.cli.doctor.report import Report
from bot.config import ENV_API_TOKEN, Config, ConfigError, load_config
from bot.util import statedir
from bot.util.jsonhttp import Unreachable, call

CONTAINER_ENV = "PERMISSION_BOT_IN_CONTAINER"
"""Set by the Dockerfile; with /.dockerenv (Docker) and /run/.containerenv (podman) it says doctor runs in a
container, where listening on all interfaces is how the published port reaches the daemon."""


def in_container(env: Mapping[str, str] = os.environ, root: str = "/") -> bool:
    """Whether this process runs in a container (the image's variable, or Docker's or podman's marker)."""
    if env.get(CONTAINER_ENV, "").strip().lower() in ("1", "true", "yes"):
        return True
    return any(os.path.exists(os.path.join(root, marker)) for marker in (".dockerenv", "run/.containerenv"))


def check_config(path: str, rep: Report) -> Config | None:
    try:
        cfg = load_config(path)
    except ConfigError as e:
        rep.fail(f"config: {e}", f"fix {path} (see config.example.toml)")
        return None
    rep.ok(f"config: {path} (homeserver {cfg.matrix.homeserver}, bot {cfg.matrix.user_id}, room {cfg.matrix.room})")
    if not cfg.api.token and not cfg.api.tokens:
        rep.warn(
            "api.token: no API token set ([[api.tokens]] or api.token), so every API route but /healthz answers 401",
            f"set api.token or {ENV_API_TOKEN}",
        )
    return cfg


def check_state(cfg: Config, rep: Report) -> bool:
    """The state folder is usable by this user (bot.util.statedir.problem, the same check as `run`'s)."""
    path = cfg.state_dir.resolve()
    if (bad := statedir.problem(path)) is not None:
        rep.fail(*bad)
        return False
    rep.ok(f"state: {path} ({'writable' if path.exists() else 'created on first start'})")
    return True


def _bind(host: str, port: int) -> OSError | None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
    except OSError as e:
        return e
    except UnicodeError as e:  # a host name IDNA cannot encode
        return OSError(str(e))
    return None


def daemon_health(cfg: Config) -> tuple[int, object]:
    """``GET /healthz`` of whatever serves ``api.listen`` (a running daemon, it is hoped): (status, body);
    (0, None) when nothing answers."""
    probe = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(cfg.api.host, cfg.api.host)
    netloc = f"[{probe}]" if ":" in probe else probe
    try:
        return call("GET", f"http://{netloc}:{cfg.api.port}/healthz", timeout=10.0)
    except Unreachable:
        return 0, None


def check_listen(
    cfg: Config, rep: Report, container: bool | None = None, health: Callable[[], tuple[int, object]] | None = None
) -> None:
    """Can the daemon bind ``api.listen``; all interfaces warn, except in a container (:func:`in_container`).
    ``health``: :func:`daemon_health`, asked at most once per doctor run (a port that never answers costs its
    timeout once, not once per check)."""
    host, port = cfg.api.host, cfg.api.port
    err = _bind(host, port)
    exposed = host not in ("127.0.0.1", "::1", "localhost")
    if err is None:
        rep.ok(f"api: {cfg.api.listen} is free for the daemon to bind")
    elif err.errno == errno.EADDRINUSE:
        status, body = health() if health else daemon_health(cfg)
        if status == 200 and isinstance(body, dict) and (body.get("live") is True or body.get("ok") is True):
            state = "connected to Matrix" if body.get("matrix_ready") else "not ready yet"
            rep.ok(f"api: {cfg.api.listen} is served by a running permission-bot daemon ({state})")
        else:
            rep.fail(f"api: {cfg.api.listen} is taken by another program", "stop it or choose another api.listen")
    else:
        rep.fail(f"api: cannot bind {cfg.api.listen} ({err.strerror or err})", "use an address of this machine")
    if exposed and (in_container() if container is None else container):
        rep.ok(
            f"api: {cfg.api.listen} inside a container is reachable only where the port is published; "
            "publish it to loopback (-p 127.0.0.1:PORT:PORT), tokens cross it in clear text"
        )
    elif exposed:
        rep.warn(f"api: {cfg.api.listen} is reachable from other machines; tokens cross it in clear text",
                 "keep it on loopback, or behind a firewall or a TLS proxy (in a container, publish it to 127.0.0.1)")
