"""The log of a command that logs (`run`, `doctor`, `hook`, `e2ee`, `state`, `audit`): bot.util.logs's one
style, with every secret the command may hold masked.

:func:`setup` runs twice: before the config is read (bot.cli.main: the environment's level and format, its
secrets masked), then with the config (:func:`refine`: its ``[log]`` table, its secrets; bot.cli.config_file
does it for the commands that load one). `acp` has its own writer (bot.door.log) over the same set-up.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from bot.util import logs

if TYPE_CHECKING:
    from bot.config import Config

# Secrets the environment may hand any command (the config's own are added from the loaded config).
SECRET_ENV = (
    "PERMISSION_BOT_MATRIX_PASSWORD",
    "PERMISSION_BOT_MATRIX_ACCESS_TOKEN",
    "PERMISSION_BOT_MATRIX_RECOVERY_KEY",
    "PERMISSION_BOT_API_TOKEN",
    "PERMISSION_BOT_TOKEN",
)
DATABASE_ENV = "PERMISSION_BOT_DATABASE_URL"


def env_secrets(env: Mapping[str, str]) -> list[str]:
    """The secrets in the environment: tokens, passwords, the database URL's password."""
    found = [env[k] for k in SECRET_ENV if env.get(k)]
    if env.get(DATABASE_ENV):  # only then: the hook, run before every tool call, loads no database code
        from bot.inbox.db.url import secrets_of

        found += secrets_of(env[DATABASE_ENV])
    return found


def config_secrets(cfg: Config) -> list[str]:
    """Every secret the config holds or names (the database URL's password, a webhook URL's credentials,
    a watched harness's token in its environment variable)."""
    from bot.inbox.db.url import secrets_of
    from bot.service.state_db import database_url
    from bot.util.urlsecrets import url_secrets

    secrets = [s for s in (cfg.matrix.password, cfg.matrix.access_token, cfg.matrix.recovery_key, cfg.api.token) if s]
    secrets += [t.secret for t in cfg.api.tokens if t.secret]
    secrets += [w.secret for w in cfg.webhooks if w.secret]
    secrets += [s for w in cfg.webhooks for s in url_secrets(str(w.url))]  # user:pw@, ?token=... of a hook URL
    secrets += secrets_of(database_url(cfg))  # the database URL's password, however it is written
    secrets += [os.environ[h.token_env] for h in cfg.harnesses if os.environ.get(h.token_env)]
    return secrets


_done = False


def setup() -> None:
    """Configure the log from the environment alone (its level and format, its secrets masked)."""
    global _done
    _done = True
    logs.configure(secrets=env_secrets(os.environ))


def refine(cfg: Config, more: list[str] | None = None) -> None:
    """Once a command's config is loaded: the log as its ``[log]`` says (the environment wins), if this process's
    command line set the log up (:func:`setup`; a test loading a config in its own process keeps its own logging);
    ``more``: secrets the command holds beyond the config's (a URL given on its command line)."""
    if _done:
        logs.configure(cfg.log.level, cfg.log.format, env_secrets(os.environ) + (more or []) + config_secrets(cfg))
