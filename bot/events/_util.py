"""Small helpers shared by the model and the schema checks: paths, short values, Unicode."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

_SURROGATE = re.compile("[\ud800-\udfff]")
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_\-.:@$]+")


def join_path(parts: Iterable[str | int]) -> str:
    """``("options", 1, "id")`` -> ``options[1].id``; odd keys are quoted; the empty path is ``content``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not _PLAIN_KEY.fullmatch(part):
            out += f"[{json.dumps(part)}]"
        else:
            out += f".{part}" if out else part
    return out or "content"


def short(value: object, limit: int = 60) -> str:
    """A one-line rendering of a JSON value for an error message."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str | int | float | bool) or value is None:
        text = json.dumps(value, ensure_ascii=False)
        if _SURROGATE.search(text):
            text = json.dumps(value)
        return text if len(text) <= limit else text[: limit - 1] + "…"
    return type(value).__name__


def unicode_problem(obj: object) -> str | None:
    """The path of the first key or string holding a lone surrogate (not valid Unicode), or None."""
    stack: list[tuple[object, tuple[str | int, ...]]] = [(obj, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                return join_path(path)
        elif isinstance(value, dict):
            items = list(value.items())
            for key, item in reversed(items):
                if isinstance(key, str) and _SURROGATE.search(key):
                    return join_path(path)
                stack.append((item, (*path, str(key))))
        elif isinstance(value, list):
            stack.extend((item, (*path, i)) for i, item in reversed(list(enumerate(value))))
    return None
