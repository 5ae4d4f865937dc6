"""A decision from the HTTP API (or a rule) on a question or a plan: what it settles with (bot.events.kinds).

- ``{"decision": "answer", "answer": TEXT}`` answers a question as a reply in the room would: a number, a
  label, several (``1, 3``, ``Docker, CI``) or free text. Only a question takes it.
- ``approve`` never fits a question (it offers no allow option); ``option_id`` naming one of its choices
  answers it with that choice; ``deny`` declines it.
- A rule (``via: "rule"``, or ``[[rules]]`` in the config) never answers a question: it may only decline one.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot import answers
from bot.answers.outcomes import answer as answer_at
from bot.answers.questions import resolve_question
from bot.events.kinds import Kind
from bot.events.states import Via
from bot.inbox.decisions import NoFittingOption, choose
from bot.inbox.record import Record
from bot.room.targets import as_target, question_answers


@dataclass(frozen=True)
class Choice:
    """The option a decision settles with, and a question's answers (for the inbox's ``Settlement``)."""

    option_id: str | None
    answers: dict[str, str] | None = None  # a question's
    chosen: list[str] | None = None


def settlement(
    rec: Record, decision: str, *, option_id: str | None, scope: str | None, answer: str | None, by: str, via: str
) -> Choice:
    """What ``decision`` settles ``rec`` with; ``NoFittingOption`` (HTTP 409) when it does not fit."""
    question = rec.kind == Kind.QUESTION
    if decision == "answer":
        if not question:
            raise NoFittingOption("only a question takes an answer; use approve or deny")
        if not isinstance(answer, str) or not answer.strip():
            raise NoFittingOption("answer: give a number, a choice's label (or several) or your own words")
    if question and via == Via.RULE:
        if decision not in ("deny", "cancel"):
            raise NoFittingOption("a rule never answers a question (it may only decline one)")
        option_id = None  # a deny rule declines, whatever option it names
    target = as_target(rec)
    if decision == "answer":
        cand = answers.Candidate(event_id="", sender=by, via=Via.API, text=str(answer).strip(), explicit=True)
        verdict = resolve_question(cand, target, str(answer).strip())
        if not isinstance(verdict, answers.Answer):
            raise NoFittingOption(verdict.message if verdict is not None else "not an answer to this question")
        return Choice(verdict.option_id, **question_answers(rec, verdict))
    chosen = choose(rec.options, decision, scope=scope, option_id=option_id)
    if question and chosen is not None:
        index = [oid for oid, _ in target.options].index(chosen)
        verdict = answer_at(answers.Candidate("", by, Via.API), target, index, None)
        return Choice(chosen, **question_answers(rec, verdict))
    return Choice(chosen)
