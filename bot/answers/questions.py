"""Typed answers to a question's prompt (bot.events.kinds): one choice, several, or the person's own words. Pure.

- One choice: a number or a choice's label, as for any prompt (feedback after a separator becomes a note);
  the last number (or its label) declines.
- Several choices, when the question allows them: numbers or labels separated by commas (``1, 3``,
  ``Docker, CI``), or numbers separated by spaces (``1 3``). They are given in the agent's order.
- The person's own words: any other text, when the question takes free text and the message is addressed to
  the prompt (a reply, or in its thread). A plain message that is not a choice is conversation.
"""

from __future__ import annotations

import re

from bot.answers.model import Answer, Candidate, Refusal, Target
from bot.answers.outcomes import answer, incomplete, not_pending, show, unparsable
from bot.answers.text import NoSuchNumber, Pick, norm, parse
from bot.events.kinds import ANSWERED, as_number, joined

_NUMERIC = re.compile(r"[#+-]?[0-9]", re.ASCII)
_NUMBERS = re.compile(r"#?[0-9]{1,6}[.)]?(?:[ \t]+#?[0-9]{1,6}[.)]?)+", re.ASCII)


def several(text: str, target: Target) -> list[int] | NoSuchNumber | None:
    """The 0-based choices of a several-choice answer (two or more), a number that names none, or None."""
    parts = [p.strip() for p in text.split(",")] if "," in text else []
    if not parts and _NUMBERS.fullmatch(text.strip()):
        parts = text.split()
    if len(parts) < 2 or not all(parts):
        return None
    picks: list[int] = []
    for part in parts:
        got = parse(part, target.options)
        if isinstance(got, NoSuchNumber):
            return got
        if not isinstance(got, Pick) or got.feedback is not None:
            return None
        if got.index not in picks:
            picks.append(got.index)
    return sorted(picks) if len(picks) > 1 else None


def _chosen(c: Candidate, target: Target, picks: list[int]) -> Answer | Refusal:
    decline = len(target.options) - 1
    if decline in picks:
        return unparsable(target, "Decline cannot be given with choices. ")
    assert target.question is not None
    if not target.question.multi:
        return unparsable(target, "This question takes one choice. ")
    ids = tuple(target.options[i][0] for i in picks)
    labels = [target.options[i][1] for i in picks]
    return Answer(target.request_id, ANSWERED, c.via, None, c.sender, c.event_id, answer=joined(labels), chosen=ids)


def resolve_question(c: Candidate, target: Target, text: str) -> Answer | Refusal | None:
    """A typed answer ``text`` to the question ``target`` (pending or not; explicit or bound)."""
    assert target.question is not None
    if len(target.options) == 1 and norm(text) not in {norm(n) for n in target.options[0]}:
        # no choices: any words but "decline" answer it ("1" is an answer, not the decline line's number)
        single: Pick | NoSuchNumber | None = None
        many: list[int] | NoSuchNumber | None = None
    else:
        single = parse(text, target.options)
        many = several(text, target) if not isinstance(single, Pick) else None
    return _decide(c, target, text, single, many)


def _decide(
    c: Candidate, target: Target, text: str, single: Pick | NoSuchNumber | None, many: list[int] | NoSuchNumber | None
) -> Answer | Refusal | None:
    assert target.question is not None
    if not target.pending:
        answer_like = isinstance(single, Pick) or isinstance(many, list) or (c.explicit and target.question.free_text)
        return not_pending(target) if answer_like else None
    if not c.explicit and not target.complete and (isinstance(single, Pick) or isinstance(many, list)):
        return incomplete(target)
    if isinstance(single, Pick):
        return answer(c, target, single.index, single.feedback)
    if isinstance(many, list):
        return _chosen(c, target, many)
    if not c.explicit:
        return None  # a plain message that is no choice: conversation
    missing = single if isinstance(single, NoSuchNumber) else many if isinstance(many, NoSuchNumber) else None
    if missing is not None:
        return unparsable(target, f"There is no choice {missing.number}. ")
    if target.question.free_text and target.question.answer_type != "text":
        if as_number(text, target.question.answer_type) is None:
            wanted = "an integer" if target.question.answer_type == "integer" else "a number"
            return unparsable(target, f"This question takes {wanted}. ")
    if target.question.free_text:
        return Answer(target.request_id, ANSWERED, c.via, None, c.sender, c.event_id, answer=text, chosen=())
    if len(text.split()) > 1:
        return None
    return unparsable(target, f"{show(text)} is not one of the choices. ")
