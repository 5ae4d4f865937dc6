"""UTC timestamps as the wire wants them: ``2026-11-07T10:30:00.000Z``."""

from __future__ import annotations

from datetime import UTC, datetime


def iso_ms(ts: float) -> str:
    """Epoch seconds -> RFC 3339 UTC with milliseconds and ``Z``."""
    dt = datetime.fromtimestamp(ts, tz=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def to_datetime(ts: float) -> datetime:
    """Epoch seconds -> aware UTC datetime."""
    return datetime.fromtimestamp(ts, tz=UTC)
