"""Command-line flag values shared by the client verbs: a duration flag read, or one usage line."""

from __future__ import annotations

import sys

from bot.util.durations import DurationError, parse_duration


def duration_flag(prog: str, flag: str, text: str) -> float | None:
    """``text`` (``30s``, ``5m``) in seconds; else None after one line ``PROG: FLAG: why`` on stderr (exit 2)."""
    try:
        return parse_duration(text)
    except DurationError as e:
        print(f"{prog}: {flag}: {e}", file=sys.stderr)
        return None
