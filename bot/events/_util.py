"""Small helpers shared by the model and the schema checks: paths, short values, Unicode."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from bot.util.words import clip

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
        return clip(text, limit)
    return type(value).__name__


def unicode_problem(obj: object) -> str | None:
    """The path of the first key or string holding a lone surrogate (not valid Unicode), or None.

    Iterative, with parent links, so deep nesting costs neither recursion nor quadratic time.
    """
    links: list[tuple[int, str | int]] = []  # node id -> (parent node id, key in parent)
    stack: list[tuple[object, int]] = [(obj, -1)]

    def path_of(node: int) -> str:
        parts: list[str | int] = []
        while node >= 0:
            node, key = links[node]
            parts.append(key)
        return join_path(reversed(parts))

    while stack:
        value, node = stack.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                return path_of(node)
        elif isinstance(value, dict):
            for key, item in reversed(list(value.items())):
                if isinstance(key, str) and _SURROGATE.search(key):
                    return path_of(node)
                links.append((node, str(key)))
                stack.append((item, len(links) - 1))
        elif isinstance(value, list):
            for index in range(len(value) - 1, -1, -1):
                links.append((node, index))
                stack.append((value[index], len(links) - 1))
    return None
