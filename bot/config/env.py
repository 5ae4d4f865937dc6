"""Secrets from the environment: they win over the file (the file may then hold none)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from bot.config.base import ConfigError
from bot.config.tokens import TokenSourceError, fill_secrets_from_env

ENV_PASSWORD = "PERMISSION_BOT_MATRIX_PASSWORD"
ENV_ACCESS_TOKEN = "PERMISSION_BOT_MATRIX_ACCESS_TOKEN"
ENV_API_TOKEN = "PERMISSION_BOT_API_TOKEN"
ENV_RECOVERY_KEY = "PERMISSION_BOT_MATRIX_RECOVERY_KEY"

_MATRIX = {ENV_PASSWORD: "password", ENV_ACCESS_TOKEN: "access_token", ENV_RECOVERY_KEY: "recovery_key"}


def with_env(data: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    """A copy of parsed TOML ``data`` with the environment's secrets filled in (tables copied, not changed)."""
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()}
    matrix = data.get("matrix")
    if isinstance(matrix, dict):
        for var, key in _MATRIX.items():
            if env.get(var):
                matrix[key] = env[var]
    if env.get(ENV_API_TOKEN):
        api = data.setdefault("api", {})
        if isinstance(api, dict):
            api["token"] = env[ENV_API_TOKEN]
    try:
        fill_secrets_from_env(data, env)
    except TokenSourceError as e:
        raise ConfigError(str(e)) from None
    return data


def secret_source(key: str, env: Mapping[str, str] | None = None) -> str:
    """Where the matrix secret ``key`` (``password``, ``access_token``, ``recovery_key``) came from, for
    messages: its environment variable when set (it wins over the file), else ``matrix.KEY``."""
    env = os.environ if env is None else env
    var = next((v for v, k in _MATRIX.items() if k == key), "")
    return f"env {var}" if var and env.get(var) else f"matrix.{key}"
