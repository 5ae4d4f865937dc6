"""Matrix events -> answers to permission prompts. Pure: no I/O, no clock.

Two steps so the daemon can look things up in between:

1. :func:`classify` reads one raw room event (``event.source`` from nio) and says what it could be an answer to
   (a :class:`Candidate`), or ``None``.
2. The daemon finds the prompt the candidate addresses (by ``prompt_event_id`` for replies, threads, reactions
   and addressed structured answers; by ``request_id`` for other structured answers; by the room timeline,
   :mod:`bot.answers.timeline`, for plain messages) and the pending prompts, then :func:`resolve` (here) turns
   them into an :class:`Answer`, a :class:`Refusal` (a notice to post) or ``None`` (ignore).

Neither function decides *who* may answer, and neither raises on bad input.

Parts, one job each: ``model`` (the data), ``classify`` (an event -> a candidate), ``reactions``,
``structured`` and ``typed`` (each kind of answer: read and decided), ``text`` (a typed answer: the
whole text is a choice, + feedback after a separator), ``outcomes`` (answers and the refusal notices),
``timeline`` (plain answers bind to what the sender saw: the room's
marks -> the one prompt), ``lookalike`` (what a reader could take for a prompt, judged on normalised
text: NFKC, confusables, invisibles removed, HTML reduced to its text).

Also: ``questions`` (typed answers to a question's prompt (bot.events.kinds)).
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.answers.classify import classify
from bot.answers.model import Answer, Asked, Candidate, Refusal, Target
from bot.answers.reactions import resolve_reaction
from bot.answers.structured import resolve_structured
from bot.answers.text import KEYCAPS, keycap_index
from bot.answers.typed import resolve_text
from bot.events.models import ANSWER_KEY
from bot.events.states import Via

__all__ = [
    "ANSWER_KEY", "KEYCAPS", "Answer", "Asked", "Candidate", "Refusal", "Target", "classify", "keycap_index", "resolve"
]


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
