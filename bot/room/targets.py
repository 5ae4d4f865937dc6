"""A record as the answer cores (:mod:`bot.answers`) see it: the options numbered as its prompt numbers them,
what a question asks, and a question's answer as ``settle`` takes it (pure)."""

from __future__ import annotations

from typing import Any

from bot import answers
from bot.events.kinds import Kind, question_of
from bot.inbox.record import Record
from bot.inbox.session_rules import facts, offered
from bot.prompts.options import shown_order
from bot.room.posts import prompt_complete


def question_answers(rec: Record | None, verdict: answers.Answer) -> dict[str, Any]:
    """``settle``'s ``answers`` and ``chosen`` for an answer to a question (nothing for a decline or others)."""
    q = asked(rec) if rec is not None else None
    if q is None or verdict.answer is None:
        return {}
    return {"answers": {q.text: verdict.answer}, "chosen": list(verdict.chosen)}


def as_target(rec: Record) -> answers.Target:
    """What an answer can pick: the options numbered as the prompt numbers them (by meaning)."""
    shown = shown_order(rec.options, rec.kind)
    kinds = [str(o.get("kind", "")) for o in shown]
    return answers.Target(
        request_id=rec.id,
        prompt_event_id=rec.prompt_event_id or None,
        options=[(str(o["optionId"]), str(o["name"])) for o in shown],
        digest=rec.digest,
        revision=rec.revision,
        pending=rec.pending,
        kinds=kinds,
        complete=prompt_complete(rec),
        session=offered(facts(rec), kinds),
        question=asked(rec),
    )


def asked(rec: Record) -> answers.Asked | None:
    """What a question's prompt asks (None for other requests, and for a question whose input no longer reads)."""
    if rec.kind != Kind.QUESTION:
        return None
    try:
        q = question_of(rec.raw_input)
    except ValueError:
        return None
    return answers.Asked(text=q.text, multi=q.multi, free_text=q.free_text, answer_type=q.answer_type)
