"""Step 2: a candidate, the prompt it addresses and the pending prompts -> Answer | Refusal | None."""

from __future__ import annotations

from collections.abc import Sequence

from bot.answers.model import Answer, Candidate, Refusal, Target
from bot.answers.reactions import resolve_reaction
from bot.answers.structured import resolve_structured
from bot.answers.typed import resolve_text
from bot.events.states import Via


def resolve(
    c: Candidate, target: Target | None, pending: Sequence[Target], waiting: int | None = None
) -> Answer | Refusal | None:
    """Decide what ``c`` does.

    ``target`` is the prompt ``c`` addresses (``None`` if it addresses nothing known); for a
    plain message, the one prompt its sender could have meant (:func:`bot.answers.timeline.bind`) or
    ``None`` (then the bot asks which, if the text answers any of ``pending``).
    ``pending`` the pending prompts the bot may name when it asks (the room's newest, a bounded number);
    ``waiting`` how many are pending in all, if more. ``None`` means: not an answer, stay quiet.
    """
    if c.via == Via.STRUCTURED:
        return resolve_structured(c, target)
    if c.via == Via.REACTION:
        return resolve_reaction(c, target)
    if c.via == Via.MATRIX:
        return resolve_text(c, target, [t for t in pending if t.pending], waiting)
    return None
