"""Matrix events -> answers to permission prompts. Pure: no I/O, no clock.

Two steps so the daemon can look things up in between:

1. :func:`classify` reads one raw room event (``event.source`` from nio) and
   says what it could be an answer to (a :class:`Candidate`), or ``None``.
2. The daemon finds the prompt the candidate addresses (by ``prompt_event_id``
   for replies, threads, reactions and addressed structured answers; by
   ``request_id`` for other structured answers; by the room timeline,
   :mod:`bot.answers.timeline`, for plain messages) and the pending prompts, then
   :func:`resolve` turns them into an
   :class:`Answer`, a :class:`Refusal` (a notice to post) or ``None`` (ignore).

Neither function decides *who* may answer, and neither raises on bad input.

Parts, one job each: ``model`` (the data), ``classify`` (an event -> a candidate), ``reactions``,
``structured`` and ``typed`` (each kind of answer: read and decided), ``text`` (a typed answer: the
whole text is a choice, + feedback after a separator), ``outcomes`` (answers and the refusal notices),
``decide`` (:func:`resolve`), ``timeline`` (plain answers bind to what the sender saw: the room's
marks -> the one prompt), ``lookalike`` (what a reader could take for a prompt, judged on normalised
text: NFKC, confusables, invisibles removed, HTML reduced to its text).

Also: ``questions`` (typed answers to a question's prompt (bot.events.kinds)).
"""

from __future__ import annotations

from bot.answers.classify import classify, strip_reply_fallback
from bot.answers.decide import resolve
from bot.answers.model import ROOM_VIAS, Answer, Asked, Candidate, Refusal, RefusalKind, Target
from bot.answers.reactions import SHORTCUTS
from bot.answers.text import KEYCAPS, keycap_index
from bot.events.models import ANSWER_KEY

__all__ = [
    "ANSWER_KEY",
    "KEYCAPS",
    "ROOM_VIAS",
    "SHORTCUTS",
    "Answer",
    "Asked",
    "Candidate",
    "Refusal",
    "RefusalKind",
    "Target",
    "classify",
    "keycap_index",
    "resolve",
    "strip_reply_fallback",
]
