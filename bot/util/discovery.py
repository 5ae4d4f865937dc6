"""Where the client verbs (`acp`, `permissions`) find the daemon: flags, else environment, else the default.

The token comes from ``--token-file PATH`` or ``PERMISSION_BOT_TOKEN``, never argv: a command
line is readable by every process on the machine (``/proc/PID/cmdline``). ``--token`` still
works for old scripts, with a warning.
"""

from __future__ import annotations

import os
import sys
import urllib.parse
from pathlib import Path

DEFAULT_URL = "http://127.0.0.1:8750"
URL_ENV = "PERMISSION_BOT_URL"
TOKEN_ENV = "PERMISSION_BOT_TOKEN"
ENV_PREFIX = "PERMISSION_BOT_"


class TokenFileError(Exception):
    """A ``--token-file`` that cannot be read or is empty (the message never holds its content)."""


def read_token_file(path: str) -> str:
    """The token in ``path``: its first line, stripped."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else "not UTF-8 text"
        raise TokenFileError(f"--token-file {path}: cannot read it ({why.lower()})") from None
    lines = text.strip().splitlines()
    if not lines or not lines[0].strip():
        raise TokenFileError(f"--token-file {path}: the file is empty")
    return lines[0].strip()


ARGV_TOKEN_WARNING = (
    f"--token puts the secret in the command line, which every local process can read; "
    f"use --token-file PATH or {TOKEN_ENV}"
)


def warn_argv_token(prog: str) -> None:
    """One line on stderr for ``--token``: the secret is in argv."""
    sys.stderr.write(f"{prog}: warning: {ARGV_TOKEN_WARNING}\n")


def discover(url: str | None, token: str | None, token_file: str | None = None) -> tuple[str, str | None]:
    """The daemon's base URL (no trailing slash) and its API token (None when unset).

    The token: ``token_file``, else ``token`` (``--token``), else the environment.
    """
    u = (url or os.environ.get(URL_ENV) or DEFAULT_URL).strip().rstrip("/")
    if token_file:
        return u, read_token_file(token_file)
    t = token if token is not None else os.environ.get(TOKEN_ENV)
    return u, (t or None)


def is_http_url(url: str) -> bool:
    """Whether ``url`` looks like ``http(s)://HOST[:PORT]...`` (what a daemon URL must be)."""
    parts = urllib.parse.urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def agent_environment(env: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """``env`` without any ``PERMISSION_BOT_*`` variable: what an agent may see."""
    return {k: v for k, v in env.items() if not k.upper().startswith(ENV_PREFIX)}
