"""TOML config -> validated settings, with environment overrides for secrets.

Every problem becomes one ``ConfigError`` line naming the key, e.g. ``matrix.homeserver: required``;
never a value (it may be a secret).

Parts: base.py (ConfigError, the section base, duration, URL and name field types), matrix.py ([matrix]
with trust and pinned devices, [answerers]), api.py ([api]), tokens.py ([[api.tokens]]), service.py ([state],
[prompts], [log], [[webhooks]]), harnesses.py ([[harnesses]]), rooms.py ([[rooms]]: more station rooms, checked
across tables), env.py (secrets from the environment, the tokens' ``secret_env`` too), messages.py (a validation
error as one line),
load.py (the whole Config, parse_config, load_config; [[rules]] are checked by bot.inbox.rules).

Also: ``escalation`` ([escalation] (and ``[[rooms]] escalation = {...}``)).
"""

from __future__ import annotations

from bot.config.api import ApiConfig
from bot.config.base import ConfigError
from bot.config.env import ENV_API_TOKEN, ENV_PASSWORD, ENV_RECOVERY_KEY, secret_source
from bot.config.harnesses import HarnessConfig
from bot.config.load import Config, load_config, parse_config
from bot.config.matrix import AnswerersConfig, MatrixConfig
from bot.config.rooms import DEFAULT_ROOM
from bot.config.service import PromptsConfig, WebhookConfig

__all__ = [
    "DEFAULT_ROOM",
    "ENV_API_TOKEN",
    "ENV_PASSWORD",
    "ENV_RECOVERY_KEY",
    "AnswerersConfig",
    "ApiConfig",
    "Config",
    "ConfigError",
    "HarnessConfig",
    "MatrixConfig",
    "PromptsConfig",
    "WebhookConfig",
    "load_config",
    "parse_config",
    "secret_source",
]
