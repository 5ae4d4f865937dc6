"""Strict RFC 3339 date-times: the one check the models and the JSON Schema share."""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime, timedelta, timezone

# ASCII digits only ([0-9], not \d), upper-case T and Z, seconds required, offsets with a colon.
_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})"
)
_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _fields(text: str) -> tuple[int, int, int, int, int, int, str, int] | None:
    """The parts of a valid date-time (offset in minutes east of UTC), or None."""
    m = _RFC3339.fullmatch(text)
    if m is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    frac, zone = m.group(7) or "", m.group(8)
    if not 1 <= month <= 12:
        return None
    last = 29 if month == 2 and calendar.isleap(year) else _DAYS[month - 1]
    if not 1 <= day <= last or hour > 23 or minute > 59 or second > 60:
        return None
    offset = 0
    if zone != "Z":
        oh, om = int(zone[1:3]), int(zone[4:6])
        if oh > 23 or om > 59:
            return None
        offset = (oh * 60 + om) * (1 if zone[0] == "+" else -1)
    # A leap second exists only at 23:59:60 UTC.
    if second == 60 and (hour * 60 + minute - offset) % 1440 != 23 * 60 + 59:
        return None
    return year, month, day, hour, minute, second, frac, offset


def is_rfc3339(text: object) -> bool:
    """True when ``text`` is a string holding exactly an RFC 3339 ``date-time`` (with calendar checks)."""
    return isinstance(text, str) and _fields(text) is not None


def parse_rfc3339(text: str) -> datetime:
    """An aware datetime for a valid RFC 3339 date-time; ``ValueError`` otherwise.

    Fractions beyond microseconds are truncated; a leap second becomes the next second.
    Years Python cannot hold (0000, or 0001/9999 pushed out by the offset) raise ``ValueError``.
    """
    parts = _fields(text)
    if parts is None:
        raise ValueError(f"not an RFC 3339 date-time: {text!r}")
    year, month, day, hour, minute, second, frac, offset = parts
    micro = int((frac[1:] + "000000")[:6]) if frac else 0
    try:
        tz = UTC if offset == 0 else timezone(timedelta(minutes=offset))
        leap = second == 60
        value = datetime(year, month, day, hour, minute, 59 if leap else second, micro, tzinfo=tz)
        return value + timedelta(seconds=1) if leap else value
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"date-time out of range: {text!r}") from exc


def format_utc_ms(when: datetime) -> str:
    """``when`` in UTC with milliseconds and ``Z`` (``2026-11-07T10:30:00.000Z``); naive means UTC."""
    utc = when if when.tzinfo is None else when.astimezone(UTC).replace(tzinfo=None)
    return utc.isoformat(timespec="milliseconds") + "Z"


def iso_ms(ts: float) -> str:
    """Epoch seconds -> RFC 3339 UTC with milliseconds and ``Z``: ``2026-11-07T10:30:00.000Z``; as
    ``format_utc_ms(to_datetime(ts))``, by the C isoformat (a listing writes one per record)."""
    return to_datetime(ts).isoformat(timespec="milliseconds")[:-6] + "Z"  # without its "+00:00"


def to_datetime(ts: float) -> datetime:
    """Epoch seconds -> aware UTC datetime."""
    return datetime.fromtimestamp(ts, tz=UTC)
