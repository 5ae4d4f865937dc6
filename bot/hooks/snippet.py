"""`permission-bot hook print-config`: the hook settings to paste. Pure.

Claude Code reads ``hooks`` from its settings.json; Codex from ``CODEX_HOME/hooks.json`` (same
shape, and it runs a hook only once trusted). The hook's timeout is longer than the prompt's, so
the room times out first; ``"onFailure": "block"`` (failures and timeouts deny) only with
``--fallback deny``.
"""

from __future__ import annotations

from typing import Any

from bot.cli.discovery import DEFAULT_URL, TOKEN_ENV
from bot.hooks.models import Cli

MARGIN = 60.0  # seconds the hook outlives prompts.timeout


def hook_timeout(prompt_timeout: float) -> int:
    """The hook ``timeout`` (seconds) for a given ``prompts.timeout``."""
    return int(prompt_timeout + MARGIN)


def snippet(cli: Cli, *, prompt_timeout: float, fallback: str = "ask", http_url: str | None = None) -> dict[str, Any]:
    """The settings object: a PermissionRequest command hook (or, with ``http_url``, an HTTP hook)."""
    hook: dict[str, Any]
    if http_url is not None:
        hook = {
            "type": "http",
            "url": f"{(http_url or DEFAULT_URL).rstrip('/')}/hooks/{cli}",
            "headers": {"Authorization": f"Bearer ${TOKEN_ENV}"},
            "allowedEnvVars": [TOKEN_ENV],
        }
    else:
        command = f"permission-bot hook {cli}" + (" --fallback deny" if fallback == "deny" else "")
        hook = {"type": "command", "command": command}
    hook["timeout"] = hook_timeout(prompt_timeout)
    if fallback == "deny":
        hook["onFailure"] = "block"
    return {"hooks": {"PermissionRequest": [{"matcher": "*", "hooks": [hook]}]}}
