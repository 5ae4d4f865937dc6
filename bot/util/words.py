"""How text shown to people is clipped: ``clip()``, the one text trimmer."""

from __future__ import annotations


def clip(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, ending in "…" when cut."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"
