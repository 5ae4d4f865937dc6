"""bot.answers.lookalike: could a reader take a message for a prompt? Judged on what a reader sees, normalised."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.answers.lookalike import html_text, looks_like_prompt, normalise

BANNER = "Permission needed: rm -rf /tmp/cache"
INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\ufe0f", "\U000e0041", "\u034f",
             "\u180e", "\u3164", "\u115f"]
CYRILLIC = {"p": "\u0440", "e": "\u0435", "o": "\u043e", "i": "\u0456", "s": "\u0455", "a": "\u0430",
            "c": "\u0441"}
GREEK = {"o": "\u03bf", "i": "\u03b9", "n": "\u03b7", "p": "\u03c1"}


@pytest.mark.parametrize("text", [
    BANNER,
    "P\u0435rmission needed: ls",  # Cyrillic е
    "Permis\u200bsion needed: ls",  # zero-width space
    "\uff30\uff45\uff52\uff4d\uff49\uff53\uff53\uff49\uff4f\uff4e needed",  # fullwidth
    "\U0001d40f\U0001d41e\U0001d42b\U0001d426\U0001d422\U0001d42c\U0001d42c\U0001d422\U0001d428\U0001d427",  # bold
    "\u202eDEDEEN NOISSIMREP",  # a bidi override shows it the right way round
    "p\u0301e\u0308rmission",  # combining marks
    "PERMlSSlON", "Perrnission", "perm1ss1on", "P E R M I S S I O N", "per-mis.sion",
    "1. Allow once", "1) go", "(2) no", "[3] later", "#1 - sure", "1\ufe0f\u20e3 Sure", "\u2460. yes",
    "\u0661. ok", "I. Sure", "\u2461 go", "\u2776 go", "\u2469 go", "\uff12) go",
    "ls? 1\ufe0f\u20e3 Sure", "ls? \u2460 yes",
    "Run ls? Reply 1 to allow", "approve?", "deny it", "Reject", "accept", "decline", "permit",
    "first\nsecond",
    "first\u2028second", "first\r\nsecond", "first\rsecond", "first\x85second",
])
def test_prompt_like_bodies(text: str) -> None:
    assert looks_like_prompt(text, None)


@pytest.mark.parametrize("html", [
    "Permission <span></span>needed",
    "Per<b>miss</b>ion",
    "Permi&#115;sion",
    "<ol><li>Sure</li></ol>",
    "<p>hi</p><p>there</p>",
    "hi<br>there",
    "<img alt='Permission needed'>",
    "x&#x202e;y",
    "<mx-reply><blockquote>Permission needed</blockquote></mx-reply>1",
])
def test_prompt_like_html(html: str) -> None:
    assert looks_like_prompt("ok", html)
    assert not looks_like_prompt("ok", None)


@pytest.mark.parametrize("text", [
    "lgtm, looking at the logs", "1", "#2", "1 sec, let me check", "ok!", "\U0001f44d", "thanks", "3pm works",
    "Привет всем", "can you check the build?", "",
])
def test_chat_is_not_a_prompt(text: str) -> None:
    assert not looks_like_prompt(text, None)
    assert not looks_like_prompt(text, f"<b>{text}</b>")


def test_html_text_is_what_a_client_shows() -> None:
    assert html_text("<ol start=3><li>a</li><li>b</li></ol>").split() == ["3.", "a", "4.", "b"]
    assert html_text("<ul><li>a</li></ul>").split() == ["a"]
    assert html_text("a &amp; <!-- hidden --> b") == "a &  b"


def test_normalise() -> None:
    assert normalise("P\u0435r\u200bmi\u00adssion\uff01") == "permission!"
    assert normalise("A\nB\u2029C\rD") == "a\nb\nc\nd"
    assert normalise("\u0440\u0430\u0441\u0435") == "pace"


_SAFE = st.lists(st.sampled_from(["lgtm", "the", "build", "is", "green", "looking", "at", "logs", "ok", "thanks",
                                  "soon", "\U0001f44d", "coffee"]), min_size=1, max_size=8).map(" ".join)


@settings(max_examples=200)
@given(where=st.lists(st.tuples(st.integers(0, 40), st.sampled_from(INVISIBLE)), max_size=6),
       swaps=st.lists(st.sampled_from(sorted({**CYRILLIC, **GREEK}.items())), max_size=6),
       case=st.sampled_from([str.upper, str.lower, str.title, str]), spans=st.booleans())
def test_no_spelling_hides_the_banner(where: list[tuple[int, str]], swaps: list[tuple[str, str]],
                                      case: object, spans: bool) -> None:
    text = case("Permission needed") if callable(case) else "Permission needed"
    for latin, other in swaps:
        text = text.replace(latin, other, 1)
    for at, ch in where:
        at = at % (len(text) + 1)
        text = text[:at] + ch + text[at:]
    if spans:
        assert looks_like_prompt("ok", "".join(f"<span>{c}</span>" for c in text))
    else:
        assert looks_like_prompt(text, None)


@settings(max_examples=100)
@given(_SAFE)
def test_harmless_chat_stays_harmless(text: str) -> None:
    assert not looks_like_prompt(text, None)


@settings(max_examples=300)
@given(st.text(max_size=200), st.text(max_size=200))
def test_never_raises(text: str, html: str) -> None:
    assert looks_like_prompt(text, html) in (True, False)
    assert looks_like_prompt(None, "<" + html) in (True, False)


def test_every_tr39_look_alike_of_a_prompt_word_letter_reads_as_it() -> None:
    """Whatever the confusables data lists as looking like a letter of a prompt word is read as that letter."""
    from confusable_homoglyphs import confusables  # type: ignore[import-untyped]

    marks_only = {"\u02db", "\u037a"}  # ogonek, iota subscript: marks that read as nothing

    def glyphs(letter: str) -> list[str]:
        found = [str(g["c"]).strip("\u200e") for g in confusables.confusables_data.get(letter, [])]
        return [g for g in found if len(g) == 1 and g not in marks_only]

    checked = 0
    for word in ("permission", "allow", "approve", "accept", "reject", "deny", "decline"):
        for i, letter in enumerate(word):
            for glyph in glyphs(letter) + glyphs(letter.upper()):
                assert looks_like_prompt(f"ok {word[:i]}{glyph}{word[i + 1:]}", None), (word, glyph)
                checked += 1
    assert checked > 500
