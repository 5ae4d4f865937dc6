"""`permission-bot hook print-config`: the hook settings to paste (pure), and the program they run.

Claude Code reads ``hooks`` from its settings.json; Codex from ``CODEX_HOME/hooks.json`` (same
shape, and it runs a hook only once trusted: `permission-bot hook trust codex`). The command hook
names its agent token file (``--token-file``, by default :func:`default_token_file`), so it works
without any variable exported to the CLI. The hook's timeout is longer than the prompt's, so the
room times out first; ``"onFailure": "block"`` (failures and timeouts deny) only with ``--fallback deny``.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bot.hooks.models import Cli
from bot.util.discovery import DEFAULT_URL, TOKEN_ENV

MARGIN = 60.0  # seconds the hook outlives prompts.timeout


def default_token_file(env: Mapping[str, str]) -> str:
    """Where the printed hook reads its agent token unless told otherwise:
    ``$XDG_CONFIG_HOME/permission-bot/agent-token``, else ``~/.config/permission-bot/agent-token``."""
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return str(Path(base) / "permission-bot" / "agent-token")


def hook_command(
    cli: Cli, program: str | tuple[str, ...], token_file: str, url: str | None = None, fallback: str = "ask"
) -> str:
    """The command line of the command hook, exactly as print-config writes it (``shlex.join``: each word
    quoted, no shell syntax); ``hook trust codex`` trusts only a command this gives back."""
    words = [*((program,) if isinstance(program, str) else program), "hook", cli, "--token-file", token_file]
    if url:
        words += ["--url", url]
    if fallback == "deny":
        words += ["--fallback", "deny"]
    return shlex.join(words)


def running_program(argv0: str, executable: str) -> tuple[str, ...]:
    """The absolute words that start this permission-bot: its console script, else ``python -m bot``."""
    path = Path(argv0)
    if path.name.startswith("permission-bot") and path.exists():
        return (str(path.resolve() if not path.is_absolute() else path.absolute()),)
    return (str(Path(executable).absolute()), "-m", "bot")


def own_program() -> str | None:
    """Where this install's ``permission-bot`` is: the one program ``hook print-config codex`` writes into a hook
    and ``hook trust codex`` trusts (never a program merely named ``permission-bot`` elsewhere). The resolved
    absolute path of its console script: the one that is running (``argv[0]``), else the one beside this
    interpreter; None when neither is an executable file."""
    argv0, executable = sys.argv[0], sys.executable
    candidates = [argv0] if os.path.basename(argv0) == "permission-bot" else []
    if executable:
        candidates.append(os.path.join(os.path.dirname(executable), "permission-bot"))
    for c in candidates:
        path = os.path.realpath(c)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def snippet(
    cli: Cli,
    *,
    prompt_timeout: float,
    token_file: str,
    fallback: str = "ask",
    http_url: str | None = None,
    url: str | None = None,
    program: str | tuple[str, ...] = ("permission-bot",),
) -> dict[str, Any]:
    """The settings object: a PermissionRequest command hook running ``program`` (the words that start
    permission-bot: print-config passes the absolute path of the running one, so a virtualenv that is not on
    the CLI's PATH still works; for Codex this install's path, :func:`own_program`) reading
    ``token_file`` (with ``url`` when the daemon is not at the default address), or, with ``http_url``, an
    HTTP hook."""
    hook: dict[str, Any]
    if http_url is not None:
        hook = {
            "type": "http",
            "url": f"{(http_url or DEFAULT_URL).rstrip('/')}/hooks/{cli}",
            "headers": {"Authorization": f"Bearer ${TOKEN_ENV}"},
            "allowedEnvVars": [TOKEN_ENV],
        }
    else:
        hook = {"type": "command", "command": hook_command(cli, program, token_file, url, fallback)}
    hook["timeout"] = int(prompt_timeout + MARGIN)
    if fallback == "deny":
        hook["onFailure"] = "block"
    return {"hooks": {"PermissionRequest": [{"matcher": "*", "hooks": [hook]}]}}


def token_note(token_file: str, exists: bool) -> str:
    """The line print-config writes to stderr: where the token goes, and whether it is there yet."""
    state = "it is there" if exists else "it does not exist yet: create it"
    return (
        f"permission-bot hook print-config: the hook reads its agent token from {token_file} ({state}: one line, "
        f"an agent-role token from [[api.tokens]], chmod 600; or pass --token-file PATH to print another path)"
    )
