"""Durations such as ``90s``, ``5m``, ``1h30m`` or ``250ms``, parsed in one place for CLI and config."""

from __future__ import annotations

import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


class DurationError(ValueError):
    """A duration string that cannot be read."""


def parse_duration(text: str | int | float) -> float:
    """Return seconds for ``text``; a bare number counts as seconds. Raises DurationError."""
    if isinstance(text, bool):
        raise DurationError(f"not a duration: {text!r}")
    if isinstance(text, int | float):
        if text < 0:
            raise DurationError(f"negative duration: {text!r}")
        return float(text)
    s = text.strip().lower().replace(" ", "")
    if not s:
        raise DurationError("empty duration")
    try:
        value = float(s)
    except ValueError:
        pass
    else:
        if value < 0 or value != value:
            raise DurationError(f"not a duration: {text!r}")
        return value
    pos = 0
    total = 0.0
    for m in _PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(s) or pos == 0:
        raise DurationError(f"not a duration: {text!r} (try 90s, 5m, 1h)")
    return total


def format_age(seconds: float) -> str:
    """A short human age: ``12s``, ``3m``, ``2h``, ``4d``."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h"
    return f"{s // 86400}d"
