"""`permission-bot doctor --config PATH` (a first version: the config check)."""

from __future__ import annotations

import sys

from bot.config import ConfigError, load_config


def run(config_path: str) -> int:
    """Check the config; one line per check."""
    try:
        cfg = load_config(config_path)
    except ConfigError as e:
        print(f"FAIL config: {e}")
        return 1
    print(f"ok   config: {config_path} (homeserver {cfg.matrix.homeserver}, room {cfg.matrix.room})")
    if not cfg.answerers.users and cfg.answerers.min_power_level is None:
        print("WARN answerers: nobody may answer; set answerers.users or answerers.min_power_level")
    if not cfg.api.token:
        print("WARN api.token: not set; every mutating API route answers 401")
    sys.stdout.flush()
    return 0
