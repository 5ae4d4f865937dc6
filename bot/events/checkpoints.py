"""The ledger checkpoints read back from a room's history (``audit verify --against-room``): pure.

Each checkpoint is a state event of type :data:`CHECKPOINT_TYPE` (state key ``""``, content ``{"seq": N,
"hash": H}``); builds before posted an ``m.notice`` carrying the same object under that key, which is read
too. Only the bot's own events count (the caller reads those alone). A checkpoint state event whose content
is not one (redacted: a redaction strips it to ``{}``; or malformed) is a gap: :func:`gaps` names the seqs it
covered, from the one after the last readable checkpoint before it up to the first readable one after it
(or the ledger's end), and verify fails there, never skips it. A redacted ``m.room.message`` cannot be told
from a redacted prompt, and an old encrypted checkpoint notice from any other encrypted event of the bot:
neither counts (the next checkpoint state event covers every seq before it, the chain linking them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.events.ledger import CHECKPOINT_KEY, checkpoint_of

CHECKPOINT_TYPE = CHECKPOINT_KEY
"""The checkpoint's state event type (the same name as the legacy notice's content key)."""


@dataclass(frozen=True)
class Unreadable:
    """A checkpoint of the bot's whose content is gone: ``event_id``, and why (``redacted by``, or ``malformed``)."""

    event_id: str
    why: str


Seen = tuple[int, str] | Unreadable


def state_content(seq: int, h: str) -> dict[str, Any]:
    """The content of the checkpoint state event for the head ``(seq, h)``."""
    return {"seq": seq, "hash": h}


def sighting(event: Mapping[str, Any]) -> Seen | None:
    """What one of the bot's events is as a checkpoint: ``(seq, hash)``, :class:`Unreadable`, or None (none)."""
    c = event.get("content")
    if event.get("type") == CHECKPOINT_TYPE and "state_key" in event:
        cp = checkpoint_of({CHECKPOINT_KEY: c})
        if cp is not None:
            return cp
        unsigned = event.get("unsigned")
        by = unsigned.get("redacted_because") if isinstance(unsigned, Mapping) else None
        who = by.get("sender") if isinstance(by, Mapping) else None
        why = f"redacted by {str(who)[:100]}" if by is not None else "its content is not a checkpoint's"
        return Unreadable(str(event.get("event_id", "?"))[:100], why)
    if event.get("type") == "m.room.message":
        return checkpoint_of(c)
    return None


@dataclass(frozen=True)
class Gap:
    """An unreadable checkpoint in ``room``: it covered seqs from ``first`` up to ``last`` (None: the end)."""

    room: str
    first: int
    last: int | None
    checkpoint: Unreadable


def gaps(room: str, seen: Sequence[Seen]) -> list[Gap]:
    """The unreadable checkpoints of one room (its checkpoints oldest first) and the seqs each covered."""
    out: list[Gap] = []
    for i, s in enumerate(seen):
        if not isinstance(s, Unreadable):
            continue
        before = [x[0] for x in seen[:i] if not isinstance(x, Unreadable)]
        after = [x[0] for x in seen[i + 1:] if not isinstance(x, Unreadable)]
        out.append(Gap(room, max(before, default=0) + 1, min(after) if after else None, s))
    return out


def describe(gap: Gap, last_seq: int) -> str:
    """One line naming the seqs a gap covered (``last_seq``: where the checked ledger ends)."""
    last = gap.last if gap.last is not None else last_seq
    seqs = f"seqs {gap.first} to {last}" if last > gap.first else f"seq {gap.first}" + (
        "" if last == gap.first else " and after")
    return (f"{seqs}: a checkpoint of the bot's in room {gap.room} cannot be read ({gap.checkpoint.why}; event "
            f"{gap.checkpoint.event_id}): what it covered cannot be checked against the room")
