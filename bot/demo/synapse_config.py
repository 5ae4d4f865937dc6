"""Synapse's generated config, adjusted as YAML (loaded, changed, dumped): loopback only, this run's
port, the registration shared secret, no key servers, rate limits lifted, and a quieter log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

SECRET = "permission-bot-tests-shared-secret"

_LIMIT = {"per_second": 10000, "burst_count": 10000}
OVERRIDES: dict[str, Any] = {
    "registration_shared_secret": SECRET,
    "suppress_key_server_warning": True,
    "trusted_key_servers": [],
    "enable_registration": False,
    "report_stats": False,
    "rc_message": _LIMIT,
    "rc_registration": _LIMIT,
    "rc_login": {"address": _LIMIT, "account": _LIMIT, "failed_attempts": _LIMIT},
    "rc_joins": {"local": _LIMIT},
    "rc_invites": {"per_room": _LIMIT, "per_user": _LIMIT},
    "rc_admin_redaction": _LIMIT,
    "rc_room_creation": _LIMIT,
    "rc_presence": {"per_user": _LIMIT},
    "presence": {"enabled": False},  # nobody here reads presence; tracking it costs every sync
}


def load(path: Path) -> dict[str, Any]:
    """The config as a mapping; ``{}`` when missing, unreadable or not a mapping."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def dump(path: Path, data: dict[str, Any]) -> None:
    path.write_text(yaml.safe_dump(data, sort_keys=False, default_flow_style=False))


def complete(path: Path) -> bool:
    """Whether an earlier run finished adjusting this config (a run stopped halfway leaves it without)."""
    return load(path).get("registration_shared_secret") == SECRET


def port(path: Path) -> int | None:
    """The port the first listener is configured with."""
    listeners = load(path).get("listeners")
    first = listeners[0] if isinstance(listeners, list) and listeners else None
    value = first.get("port") if isinstance(first, dict) else None
    return value if isinstance(value, int) else None


def set_port(path: Path, port: int, extra: dict[str, Any] | None = None) -> None:
    """Listen on ``port`` (reused state, a new run), on loopback IPv4 only; ``extra``: keys set on top."""
    data = load(path)
    for listener in data.get("listeners") or []:
        if isinstance(listener, dict):
            listener["port"] = port
            listener["bind_addresses"] = ["127.0.0.1"]
    dump(path, data | (extra or {}))


def adjust(path: Path, port: int, extra: dict[str, Any] | None = None) -> None:
    """Turn the freshly generated config into the local, unlimited one the demo and the tests use
    (``extra``: more keys on top, the caller's own)."""
    set_port(path, port, OVERRIDES | (extra or {}))


def quieter_log(path: Path) -> None:
    """Synapse's own log at WARNING instead of INFO."""
    data = load(path)
    loggers = data.get("loggers")
    for section in [data.get("root"), *(loggers.values() if isinstance(loggers, dict) else [])]:
        if isinstance(section, dict) and section.get("level") == "INFO":
            section["level"] = "WARNING"
    if data:
        dump(path, data)
