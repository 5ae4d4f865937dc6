"""Secrets from the environment: they win over the file (the file may then hold none); [[api.tokens]]
``secret_env`` names the variable that holds a token's secret."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from bot.config.base import ConfigError

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
    _token_secrets(data, env)
    return data


def _token_secrets(data: dict[str, Any], env: dict[str, str]) -> None:
    """Fill each [[api.tokens]] ``secret`` from its ``secret_env`` (names only in errors, never values)."""
    api = data.get("api")
    tokens = api.get("tokens") if isinstance(api, dict) else None
    if not isinstance(api, dict) or not isinstance(tokens, list):
        return
    filled: list[Any] = []
    for i, t in enumerate(tokens):
        if isinstance(t, dict) and isinstance(t.get("secret_env"), str):
            if "secret" in t:
                raise ConfigError(f"api.tokens.{i}: set secret or secret_env, not both")
            value = env.get(t["secret_env"], "")
            if not value.strip():
                raise ConfigError(f"api.tokens.{i}.secret_env: environment variable {t['secret_env']} is not set")
            t = {**t, "secret": value}
        filled.append(t)
    api["tokens"] = filled


def secret_source(key: str, env: Mapping[str, str] | None = None) -> str:
    """Where the matrix secret ``key`` (``password``, ``access_token``, ``recovery_key``) came from, for
    messages: its environment variable when set (it wins over the file), else ``matrix.KEY``."""
    env = os.environ if env is None else env
    var = next((v for v, k in _MATRIX.items() if k == key), "")
    return f"env {var}" if var and env.get(var) else f"matrix.{key}"
