"""A validation error as one line naming the key (``matrix.homeserver: required``), never the value."""

from __future__ import annotations

import re

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


def one_line(err: ValidationError) -> str:
    """The first validation error as ``key.path: what is wrong``."""
    e = err.errors()[0]
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
    return f"{loc}: {msg}" if loc else msg
