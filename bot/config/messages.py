"""A validation error as one line naming the key (``matrix.homeserver: required``), never the value."""

from __future__ import annotations

import difflib
import re
from typing import Any

from pydantic import ValidationError

from bot.config.base import type_name

_TYPE_WORDS = {
    "string_type": "expected a string",
    "int_type": "expected an integer",
    "float_type": "expected a number",
    "bool_type": "expected true or false",
    "tuple_type": "expected a list",
    "list_type": "expected a list",
    "dict_type": "expected a table",
    "model_type": "expected a table",
}

_SUBKEY = re.compile(r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*")


MAX_SHOWN = 6  # errors on the one line; the rest counted


def _describe(e: Any) -> tuple[str, str]:
    """``(key.path, what is wrong)`` of one pydantic error, never its value."""
    loc = ".".join(str(p) for p in e["loc"])
    kind = e["type"]
    if kind == "missing":
        msg = "required"
    elif kind == "extra_forbidden":
        msg = "unknown key"
    elif kind in _TYPE_WORDS:
        msg = f"{_TYPE_WORDS[kind]} (got {type_name(e['input'])})"  # never the value: it may be a secret
    else:
        msg = e["msg"].removeprefix("Value error, ")
        # a list validator names the entry: "3.name: ..." after "api.tokens"
        head, sep, rest = msg.partition(": ")
        if sep and head[:1].isdigit() and _SUBKEY.fullmatch(head):
            loc, msg = f"{loc}.{head}" if loc else head, rest
    return loc, msg


def one_line(err: ValidationError) -> str:
    """Every validation error on one line, ``key.path: what is wrong; ...`` (a typo in a required key is
    said with the key it was meant to be: ``matrix.homserver: unknown key (did you mean homeserver?)``)."""
    described = [_describe(e) for e in err.errors()]
    missing: dict[str, list[str]] = {}
    for loc, msg in described:
        if msg == "required":
            parent, _, name = loc.rpartition(".")
            missing.setdefault(parent, []).append(name)
    parts = []
    for loc, msg in described:
        if msg == "unknown key":
            parent, _, name = loc.rpartition(".")
            close = difflib.get_close_matches(name, missing.get(parent, []), n=1, cutoff=0.6)
            if close:
                msg = f"unknown key (did you mean {close[0]}?)"
        parts.append(f"{loc}: {msg}" if loc else msg)
    more = len(parts) - MAX_SHOWN
    return "; ".join(parts[:MAX_SHOWN]) + (f"; and {more} more" if more > 0 else "")
