"""Words the bot shows people, kept in one place: how a settlement came (``via``) and how text is clipped."""

from __future__ import annotations

from bot.events.states import Via

VIA_WORDS: dict[str, str] = {
    Via.MATRIX: "reply",
    Via.REACTION: "reaction",
    Via.STRUCTURED: "app",
    Via.API: "API",
    Via.RULE: "rule",
    Via.TIMEOUT: "timeout",
    Via.CANCEL: "cancellation",
}


def via_words(via: str) -> str:
    """``via`` as people read it (an unknown one as it is)."""
    return VIA_WORDS.get(via, via)


def clip(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, ending in "…" when cut."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"
