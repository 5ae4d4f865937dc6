"""UTC timestamps as the wire wants them: ``2026-11-07T10:30:00.000Z``."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.events.timestamps import format_utc_ms


def iso_ms(ts: float) -> str:
    """Epoch seconds -> RFC 3339 UTC with milliseconds and ``Z``."""
    return format_utc_ms(to_datetime(ts))


def to_datetime(ts: float) -> datetime:
    """Epoch seconds -> aware UTC datetime."""
    return datetime.fromtimestamp(ts, tz=UTC)
