"""Typed answers (``m.text``): a reply or thread message to its prompt, or a plain message bound to the
one prompt its sender could have meant (:func:`bot.answers.timeline.bind`); else, if it answers some pending
prompt, the bot asks which."""

from __future__ import annotations

from collections.abc import Sequence

from bot.answers.model import Answer, Candidate, Refusal, Target
from bot.answers.outcomes import answer, incomplete, not_offered, not_pending, parse_for, show, unparsable
from bot.answers.questions import resolve_question
from bot.answers.text import NoSuchNumber, Pick

WAITING_CAP = 1000
"""How far the daemon counts the pending requests an ambiguous plain answer is told about ("1000 or more")."""


def resolve_text(
    c: Candidate, target: Target | None, live: Sequence[Target], waiting: int | None = None
) -> Answer | Refusal | None:
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
            return not_offered(target, parsed.number)
        if len(text.split()) > 1:
            return None  # conversation ("1 sec, let me check"): left alone, no notice
        return unparsable(target)  # one word that is no option ("yes"): say what the answers are
    if target is not None:  # the one prompt the sender could have meant (bot.answers.timeline.bind)
        parsed = parse_for(text, target)
        if isinstance(parsed, NoSuchNumber) and target.pending:  # "3" under a two-option prompt: say so
            return not_offered(target, parsed.number)
        if not isinstance(parsed, Pick):
            return None
        if not target.pending:
            return not_pending(target)
        if not target.complete:
            return incomplete(target)
        return answer(c, target, parsed.index, parsed.feedback)
    if any(isinstance(parse_for(text, t), Pick) for t in live):
        return _ask(live, waiting)
    return None


def _ask(live: Sequence[Target], count: int | None = None) -> Refusal:
    """Which prompt does a plain answer mean? Resolves nothing. ``count``: how many are pending, when ``live``
    holds only some of them (counted up to WAITING_CAP)."""
    ids = [show(t.request_id, 60) for t in live]
    n = max(len(ids), count or 0)
    shown = ", ".join(ids[:5]) + (f" and {n - 5} more" if n > 5 else "")
    many = f"{n} or more" if n >= WAITING_CAP else str(n)
    waiting = f"{many} requests are waiting ({shown})" if n > 1 else f"Request {shown} is waiting"
    return Refusal(
        "ambiguous",
        f"Which request do you mean? {waiting}. Reply to the prompt you mean: a plain answer counts only "
        "for the one open prompt just above it.",
        None,
    )
