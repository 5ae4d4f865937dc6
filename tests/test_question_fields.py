"""A question with no choices (an ACP form's number or text field): numbers are the person's words. Pure."""

from __future__ import annotations

from bot.answers.model import Answer, Asked, Candidate, Target
from bot.answers.questions import resolve_question
from bot.events.states import Via


def _target(options: tuple[tuple[str, str], ...]) -> Target:
    kinds = ["choose"] * (len(options) - 1) + ["reject_once"]
    return Target("s:1", "$p", options, "d", 1, True, kinds, True, None, Asked("How many?", False, True))


def _reply(text: str, explicit: bool = True) -> Candidate:
    return Candidate(event_id="$e", sender="@a:hs", via=Via.MATRIX, text=text, explicit=explicit)


def test_a_number_answers_a_field_and_decline_still_declines() -> None:
    field = _target((("decline", "Decline"),))
    for text in ("1", "#1", "2", "-3", "2.5"):
        got = resolve_question(_reply(text), field, text)
        assert isinstance(got, Answer) and got.answer == text and got.option_id == "answer", text
    got = resolve_question(_reply("decline"), field, "decline")
    assert isinstance(got, Answer) and got.option_id == "decline" and got.answer is None
    assert resolve_question(_reply("1", explicit=False), field, "1") is None  # not addressed: conversation


def test_a_question_with_choices_still_reads_numbers_as_choices() -> None:
    choices = _target((("a", "A"), ("b", "B"), ("decline", "Decline")))
    got = resolve_question(_reply("2"), choices, "2")
    assert isinstance(got, Answer) and got.option_id == "b"
