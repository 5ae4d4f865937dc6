"""Durations such as ``90s``, ``5m``, ``1h30m``, ``2w`` or ``250ms``, and a time given as an age or an ISO 8601
time, parsed in one place for CLI, API and config."""

from __future__ import annotations

import contextlib
import re
from datetime import UTC, datetime

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_PARTS = re.compile(f"(?:{_PART.pattern})+")


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
    if not _PARTS.fullmatch(s):
        raise DurationError(f"not a duration: {text!r} (try 90s, 5m, 1h)")
    return sum((float(n) * _UNITS[unit] for n, unit in _PART.findall(s)), 0.0)


def parse_since(text: str, now: float) -> float:
    """A point in time: an age with a unit (``2h``, ``7d``: before ``now``) or an ISO 8601 time (UTC when it
    names no zone), as a timestamp; ``ValueError`` saying what is accepted."""
    s = text.strip()
    if s and not s.replace(".", "").isdigit():
        with contextlib.suppress(DurationError):
            return now - parse_duration(s)
    try:
        t = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError("since: expected an ISO 8601 time or an age such as 2h or 7d") from None
    return (t if t.tzinfo is not None else t.replace(tzinfo=UTC)).timestamp()


def format_age(seconds: float) -> str:
    """A short human age: ``12s``, ``3m``, ``2h``, ``4d``."""
    s = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"
