"""bot/util/words: the one table of via words and the one way text is clipped."""

from __future__ import annotations

from bot.events.states import VIA_WORDS, via_words
from bot.util.words import clip


def test_clip_keeps_short_text_and_marks_a_cut() -> None:
    assert clip("abc", 3) == "abc"
    assert clip("abcd", 3) == "ab…" and len(clip("x" * 500, 40)) == 40
    assert clip("abc", 0) == "…"


def test_every_via_has_words() -> None:
    for via in ("matrix", "reaction", "structured", "api", "rule", "timeout", "cancel"):
        assert VIA_WORDS[via]
    assert via_words("matrix") == "reply" and via_words("other") == "other"
