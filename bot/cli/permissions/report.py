"""How the `permissions` verbs speak: stdout lines, one-line errors on stderr, and the daemon's refusals in words."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping

from bot.cli.http import Client
from bot.cli.permissions.render import clean
from bot.util.discovery import TOKEN_ENV
from bot.util.words import clip


class Fail(Exception):
    """A one-line error and its exit code (1: the daemon said no; 2: a bad command line)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def out(line: str) -> None:
    """One line on stdout, flushed (a watch is read as it goes)."""
    print(line, flush=True)


def warn(message: str) -> None:
    """One line on stderr, named after the program."""
    print(f"permission-bot: {message}", file=sys.stderr, flush=True)


def quiet_stdout() -> None:
    """Point stdout at /dev/null (its reader has gone: no second BrokenPipeError at exit)."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def reason(body: object) -> str:
    """The daemon's reason in an error body (``reason`` or ``error``, or a text body), on one line."""
    if isinstance(body, Mapping):
        r = body.get("reason") or body.get("error")
        if isinstance(r, str) and r:
            return clean(r)
    if isinstance(body, str) and body.strip():
        return clip(clean(body), 200)
    return ""


def http_message(status: int, body: object, client: Client) -> str:
    """An HTTP refusal as one line; a 401 says where the token came from and what it must be."""
    if status == 401:
        if client.token:
            return (f"HTTP 401: the daemon refused the API token (from --token-file or {TOKEN_ENV}); "
                    "it must be one of the daemon's [[api.tokens]] (or its api.token)")
        return f"HTTP 401: no API token; pass --token-file PATH or set {TOKEN_ENV}"
    why = reason(body)
    return f"HTTP {status}: {why}" if why else f"HTTP {status}"
