"""bot.answers.text: the whole text is the answer, or it is conversation (properties)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.answers.text import NoSuchNumber, Pick, parse

OPTIONS = (("allow_once", "Allow once"), ("allow_always", "Always allow"), ("reject_once", "Reject"),
           ("reject_always", "Never allow"))
choices = st.sampled_from(["1", " 2. ", "#3", "4", "allow once", "ALWAYS  allow", "reject", "Never allow.",
                           "reject_always"])
words = st.text(st.characters(categories=["L", "N"]), min_size=1, max_size=12)
separators = st.sampled_from([" - ", " – ", " — ", ": ", ":\t", "\n", " -\n", "\r\n"])


@settings(max_examples=200)
@given(choices, separators, st.lists(words, min_size=1, max_size=5))
def test_choice_then_separator_then_feedback(choice: str, sep: str, feedback: list[str]) -> None:
    alone = parse(choice, OPTIONS)
    assert isinstance(alone, Pick) and alone.feedback is None
    got = parse(choice.rstrip() + sep + " ".join(feedback), OPTIONS)
    assert got == Pick(alone.index, " ".join(feedback))


@settings(max_examples=200)
@given(choices, st.sampled_from([" ", ", ", "  ", "! ", "? "]), st.lists(words, min_size=1, max_size=5))
def test_choice_then_other_words_is_conversation(choice: str, glue: str, rest: list[str]) -> None:
    text = choice.rstrip() + glue + " ".join(rest)
    assert not isinstance(parse(text, OPTIONS), Pick), text


def test_numbers() -> None:
    assert parse("0", OPTIONS) == NoSuchNumber(0)
    assert parse("5 - no", OPTIONS) == NoSuchNumber(5)
    assert parse("1.", OPTIONS) == Pick(0, None)
    assert parse("3:30", OPTIONS) is None and parse("2.5", OPTIONS) is None
