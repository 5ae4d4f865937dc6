"""``permission-bot check-event [FILE|-]``: is this a valid ``dev.agentpod.permission.v2`` content object?

Exit 0 valid ("valid" on stdout), 1 refused (the reason on stderr, naming the field),
2 unreadable input (no such file, not UTF-8, not JSON).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bot.cli.flags import fail
from bot.events import EventError, validate_content

__all__ = ["run"]

VALID, REFUSED, UNREADABLE = 0, 1, 2
PROG = "check-event"


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def run(path: str | None) -> int:
    """Check the JSON object in ``path`` (``-`` or None: stdin); returns the exit status."""
    stdin = path is None or path == "-"
    where = "stdin" if stdin else str(path)
    try:
        data = sys.stdin.buffer.read() if stdin else Path(where).read_bytes()
    except OSError as exc:
        return fail(f"cannot read {where}: {exc.strerror or exc}", UNREADABLE, PROG)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return fail(f"{where} is not UTF-8 (byte {exc.start})", UNREADABLE, PROG)
    try:
        obj = json.loads(text, parse_constant=_no_constants)
    except json.JSONDecodeError as exc:
        return fail(f"{where} is not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", UNREADABLE, PROG)
    except (ValueError, RecursionError) as exc:
        return fail(f"{where} is not JSON: {exc}", UNREADABLE, PROG)
    try:
        validate_content(obj)
    except EventError as exc:
        return fail(f"refused: {exc}", REFUSED, PROG)
    print("valid")
    return VALID
