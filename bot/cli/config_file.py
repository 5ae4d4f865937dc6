"""The config for a command that needs it (`run`, `e2ee`, `state`, `audit`): loaded, or one line naming the key
and exit 2. Once loaded, the log is set up from it (its ``[log]`` table, its secrets masked: bot.cli.log_setup).

The line is ``permission-bot: config error: KEY: what is wrong``; it never holds a value from the
file or the environment (bot.config words every problem without one: a value may be a secret).
`doctor` reports the same line as its failed ``config`` check instead (it exits 1 when a check fails).
"""

from __future__ import annotations

from pathlib import Path

from bot.cli.flags import fail
from bot.config import Config, ConfigError, load_config

EXIT_CONFIG = 2


def load_or_exit(path: str | Path) -> Config:
    """The validated config at ``path``; on a problem, its one line on stderr and ``SystemExit(2)``."""
    try:
        cfg = load_config(path)
    except ConfigError as e:
        raise SystemExit(fail(f"config error: {e}", EXIT_CONFIG)) from None
    from bot.cli import log_setup

    log_setup.refine(cfg)
    return cfg
