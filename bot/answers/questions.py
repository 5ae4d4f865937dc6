"""Typed answers to a question's prompt (bot.events.kinds): one choice, several, or the person's own words. Pure.

- One choice: a number or a choice's label, as for any prompt (feedback after a separator becomes a note);
  the last number (or its label) declines.
- Several choices, when the question allows them: numbers or labels separated by commas (``1, 3``,
  ``Docker, CI``), or numbers separated by spaces (``1 3``). They are given in the agent's order.
- The person's own words: any other text, when the question takes free text and the message is addressed to
  the prompt (a reply, or in its thread). A plain message that is not a choice is conversation.
- A structured answer (:mod:`bot.answers.structured`) names them: ``option_ids`` (several choices) or ``text``.
"""

from __future__ import annotations

import re

from bot.answers.model import Answer, Candidate, Refusal, Target
from bot.answers.outcomes import answer, incomplete, not_offered, not_pending, offered, show, unknown_option, unparsable
from bot.answers.text import NoSuchNumber, Pick, norm, parse
from bot.events.kinds import ANSWERED, as_number, joined

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


def _chosen(c: Candidate, target: Target, picks: list[int], feedback: str | None = None) -> Answer | Refusal:
    decline = len(target.options) - 1
    if decline in picks:
        return unparsable(target, "Decline cannot be given with choices. ")
    assert target.question is not None
    if not target.question.multi:
        return unparsable(target, "This question takes one choice. ")
    ids = tuple(target.options[i][0] for i in picks)
    labels = [target.options[i][1] for i in picks]
    return Answer(target.request_id, ANSWERED, c.via, feedback, c.sender, c.event_id, answer=joined(labels), chosen=ids)


def structured_question(c: Candidate, target: Target) -> Answer | Refusal:
    """A pending prompt's structured answer giving ``option_ids`` or ``text`` (checked as current already):
    several choices of a multi-select question (one id is that option), or the person's own words."""
    rid, ids = target.request_id, [oid for oid, _ in target.options]
    q = target.question
    if c.text is not None:
        if q is None or not q.free_text:
            what = "question" if q is not None else "prompt"
            return Refusal(
                "unparsable",
                f"The {what} of {show(rid, 80)} takes no text of your own: give "
                f"option_id{'s' if q is not None and q.multi else ''}. Offered: {offered(ids)}.",
                rid,
            )
        if c.feedback is not None:
            return Refusal("unparsable", "A structured answer's feedback goes with a choice, not with text.", rid)
        if q.answer_type != "text" and as_number(c.text, q.answer_type) is None:
            wanted = "an integer" if q.answer_type == "integer" else "a number"
            return Refusal("unparsable", f"The question of {show(rid, 80)} takes {wanted}.", rid)
        return Answer(rid, ANSWERED, c.via, None, c.sender, c.event_id, answer=c.text, chosen=())
    unknown = [i for i in c.option_ids or () if i not in ids]
    if unknown:
        return unknown_option(unknown[0], rid, ids)
    picks = sorted(ids.index(i) for i in c.option_ids or ())
    if len(picks) == 1:
        return answer(c, target, picks[0], c.feedback)
    if q is None:
        return Refusal("unparsable", f"The prompt of {show(rid, 80)} takes one option_id.", rid)
    return _chosen(c, target, picks, c.feedback)


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
        return not_offered(target, missing.number, "choice")
    if target.question.free_text and target.question.answer_type != "text":
        if as_number(text, target.question.answer_type) is None:
            wanted = "an integer" if target.question.answer_type == "integer" else "a number"
            return unparsable(target, f"This question takes {wanted}. ")
    if target.question.free_text:
        return Answer(target.request_id, ANSWERED, c.via, None, c.sender, c.event_id, answer=text, chosen=())
    if len(text.split()) > 1:
        return None
    return unparsable(target, f"{show(text)} is not one of the choices. ")
