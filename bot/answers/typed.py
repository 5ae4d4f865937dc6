"""Typed answers (``m.text``): a reply or thread message to its prompt, or a plain message bound to the
one prompt its sender could have meant (:func:`bot.answers.timeline.bind`); else, if it answers some pending
prompt, the bot asks which."""

from __future__ import annotations

from collections.abc import Sequence

from bot.answers.model import Answer, Candidate, Refusal, Target
from bot.answers.outcomes import answer, incomplete, not_pending, parse_for, show, unparsable
from bot.answers.questions import resolve_question
from bot.answers.text import NoSuchNumber, Pick


def resolve_text(c: Candidate, target: Target | None, live: Sequence[Target]) -> Answer | Refusal | None:
    text = c.text.strip() if isinstance(c.text, str) else ""
    if target is not None and target.question is not None:
        return resolve_question(c, target, text) if text else None
    if c.explicit:
        if target is None:
            return None  # a reply to something that is not a prompt: ordinary chat
        parsed = parse_for(text, target)
        if not target.pending:
            # Only answer-like text gets the notice; talk under a settled prompt is left alone.
            return not_pending(target) if parsed is not None else None
        if isinstance(parsed, Pick):
            return answer(c, target, parsed.index, parsed.feedback)
        if isinstance(parsed, NoSuchNumber):
            return unparsable(target, f"There is no option {parsed.number}. ")
        if len(text.split()) > 1:
            return None  # conversation ("1 sec, let me check"): left alone, no notice
        return unparsable(target)  # one word that is no option ("yes"): say what the answers are
    if target is not None:  # the one prompt the sender could have meant (bot.answers.timeline.bind)
        parsed = parse_for(text, target)
        if isinstance(parsed, NoSuchNumber) and target.pending:  # "3" under a two-option prompt: say so
            return unparsable(target, f"There is no option {parsed.number}. ")
        if not isinstance(parsed, Pick):
            return None
        if not target.pending:
            return not_pending(target)
        if not target.complete:
            return incomplete(target)
        return answer(c, target, parsed.index, parsed.feedback)
    if any(isinstance(parse_for(text, t), Pick) for t in live):
        return _ask(live)
    return None


def _ask(live: Sequence[Target]) -> Refusal:
    """Which prompt does a plain answer mean? Resolves nothing."""
    ids = [show(t.request_id, 60) for t in live]
    shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
    waiting = f"{len(live)} requests are waiting ({shown})" if len(live) > 1 else f"Request {shown} is waiting"
    return Refusal(
        "ambiguous",
        f"Which request do you mean? {waiting}. Reply to the prompt you mean: a plain answer counts only "
        "for the one open prompt just above it.",
        None,
    )
