"""``permission-bot check-event [FILE|-]``: is this a valid ``dev.agentpod.permission.v2`` content object?

Exit 0 valid ("valid" on stdout), 1 refused (the reason on stderr, naming the field),
2 unreadable input (no such file, not UTF-8, not JSON).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from bot.events import EventError, validate_content

__all__ = ["run"]

VALID, REFUSED, UNREADABLE = 0, 1, 2


class _Unreadable(Exception):
    """The input could not be read as JSON."""


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _read(path: str | None) -> object:
    where = "stdin" if path in (None, "-") else path
    try:
        if path is None or path == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as f:
                data = f.read()
    except OSError as exc:
        raise _Unreadable(f"cannot read {where}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _Unreadable(f"{where} is not UTF-8 (byte {exc.start})") from None
    try:
        return json.loads(text, parse_constant=_no_constants)
    except json.JSONDecodeError as exc:
        raise _Unreadable(f"{where} is not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:
        raise _Unreadable(f"{where} is not JSON: {exc}") from None


def run(path: str | None) -> int:
    """Check the JSON object in ``path`` (``-`` or None: stdin); returns the exit status."""
    try:
        obj = _read(path)
    except _Unreadable as exc:
        print(f"check-event: {exc}", file=sys.stderr)
        return UNREADABLE
    try:
        validate_content(obj)
    except EventError as exc:
        print(f"check-event: refused: {exc}", file=sys.stderr)
        return REFUSED
    print("valid")
    return VALID
