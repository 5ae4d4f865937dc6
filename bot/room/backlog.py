"""In which order the poster sends the prompts not in the room yet (pure).

Few waiting (a burst): oldest first, as they came. A backlog (more than ``BACKLOG`` waiting: after an outage
of the homeserver, a take-over, a flood) would otherwise hide what arrives now behind everything before it,
for minutes. So then the newest and the oldest go alternately: a request submitted now is the newest and is
sent as soon as a send slot frees, while the backlog still drains from its oldest end at half the rate or
more. A form's questions go one at a time, in the form's order (``in_form_order``): sent at once, the
homeserver may put a later question above an earlier one. Binding is not touched by the order
(bot/answers/timeline.py: a plain answer binds by what the room shows, wherever a prompt lands); with a
backlog many prompts are pending anyway, so plain answers are asked about and replies decide.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import chain, zip_longest

from bot.events.kinds import Kind
from bot.inbox.record import Record

BACKLOG = 32
"""Prompts waiting beyond which new arrivals no longer queue behind the rest."""
NEWEST = 12
"""How many of the newest waiting prompts the poster reads each time it looks (with a backlog)."""


def order(oldest: Sequence[Record], newest: Sequence[Record]) -> list[Record]:
    """The prompts to send, in order: ``oldest`` (oldest first, up to ``BACKLOG + 1`` read) alone while no more
    than ``BACKLOG`` wait; else the ``newest`` (newest first) and the oldest alternately, each once."""
    if len(oldest) <= BACKLOG:
        return list(oldest)
    out: dict[str, Record] = {}
    for rec in chain.from_iterable(zip_longest(newest, oldest)):
        if rec is not None:
            out.setdefault(rec.id, rec)
    return list(out.values())


def in_form_order(recs: Sequence[Record], unposted: Iterable[Record]) -> list[Record]:
    """``recs`` less each question that waits for an earlier question of its session: only the earliest of the
    ``unposted`` (everything read, in flight and backing off included) may go, so a form's questions land in the
    room in its order, one after another."""
    first: dict[str, Record] = {}
    for rec in unposted:
        earlier = first.get(rec.session_id)
        if rec.kind == Kind.QUESTION and (earlier is None or rec.request_seq < earlier.request_seq):
            first[rec.session_id] = rec
    return [r for r in recs if r.kind != Kind.QUESTION or first[r.session_id].id == r.id]
