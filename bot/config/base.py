"""What every config section shares: the error type, the section base, durations and URLs as field types."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict

from bot.util.durations import DurationError, parse_duration


class ConfigError(Exception):
    """A config problem, as one line that names the key."""


class Section(BaseModel):
    """A TOML table: unknown keys refused, types strict, frozen once read."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def type_name(v: Any) -> str:
    """A TOML value's type in words (``a string``, ``a table``), never the value: it may be a secret."""
    names = {str: "a string", int: "an integer", float: "a number", bool: "true/false", list: "a list", dict: "a table"}
    return names.get(type(v), type(v).__name__)


def _seconds(v: Any) -> float:
    if not isinstance(v, str | int | float):  # TOML may hold a list, a table, a date here
        raise ValueError(f"expected a duration such as 90s, 5m or 1h (got {type_name(v)})")
    try:
        return parse_duration(v)
    except DurationError as e:
        raise ValueError(str(e)) from None


def _http(v: str) -> str:
    if not v.startswith(("http://", "https://")):
        raise ValueError("must start with http:// or https://")
    return v


Seconds = Annotated[float, BeforeValidator(_seconds)]
"""A duration (``90s``, ``5m``, a bare number of seconds), read as seconds."""

HttpUrl = Annotated[str, AfterValidator(_http)]
"""An ``http://`` or ``https://`` URL."""


def _name(v: str) -> str:
    if not v or len(v) > 64 or any(not (c.isascii() and (c.isalnum() or c in "._-")) for c in v):
        raise ValueError("must be 1-64 letters, digits, '.', '_' or '-'")
    return v


Name = Annotated[str, AfterValidator(_name)]
"""A room's or a watched harness's name: 1-64 letters, digits, '.', '_' or '-' (records show it; ``--room``
takes it)."""
