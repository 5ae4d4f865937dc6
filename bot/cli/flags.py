"""What the commands share on their command line: a duration flag read, and the one line on stderr that ends
a command with its exit code."""

from __future__ import annotations

import sys

from bot.util.durations import DurationError, parse_duration


def fail(message: str, code: int, prog: str = "permission-bot") -> int:
    """One line ``PROG: MESSAGE`` on stderr, then ``code`` (for ``return fail(...)``)."""
    print(f"{prog}: {message}", file=sys.stderr, flush=True)
    return code


def duration_flag(prog: str, flag: str, text: str) -> float | None:
    """``text`` (``30s``, ``5m``) in seconds; else None after one line ``PROG: FLAG: why`` on stderr (exit 2)."""
    try:
        return parse_duration(text)
    except DurationError as e:
        fail(f"{flag}: {e}", 2, prog)
        return None
