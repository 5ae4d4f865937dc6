"""Plain answers bind to what the sender saw: the room timeline, as marks. Pure: no I/O, no clock.

The daemon handles the station room's events in the order sync delivers them (backfilled gaps
included) and gives each event that matters a position (kept in the inbox, so positions survive
restarts and a redelivered event keeps its first one):

- ``posted``: the bot's prompt for a request (sender checked: anyone else's is never a prompt);
- ``settled``: the bot's edit that shows a request's outcome (or its prompt posted settled: one event, for a
  request a rule settled before it was posted), or the room answer that settled it
  (the answer's own position: a reader saw the prompt answered there; :func:`in_view` says which
  answers count), whichever comes first;
- ``lookalike``: a message from anyone else that a reader could take for a prompt (:mod:`bot.answers.lookalike`;
  any msgtype, notices too; an edit judged by its new text, at the edit's place; a thread message too, since
  its thread's summary shows it in the main timeline), a sticker whose text does, and anyone else's poll;
- ``answer``: a plain message that may be an answer (or an event not decrypted yet, whose
  position is kept for when it is).

:func:`bind` then says which request a plain answer at position ``at`` may settle: exactly one
prompt appears pending there (posted before it, not settled before it), and the last mark before
the answer is that prompt's posting. Anything posted, settled or faked in between: the bot asks.
A second ``settled`` mark of a request (the edit after the answer that settled it) changes
nothing a reader sees pending, so it counts for nothing. An event that marked a request settled and
is then redacted or edited by its sender no longer shows it: its mark goes, and the redaction or edit
counts as a change above (a ``lookalike`` at its place), so a plain answer after it is asked about.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from bot.answers.lookalike import looks_like_prompt
from bot.inbox.marks import Kind, Mark

V2_KEY = "suite_event_type"
CARD_KEY = "dev.agentpod.permission"


@dataclass(frozen=True)
class Sighting:
    """What one room event is for the timeline."""

    event_id: str
    kind: Kind
    request_id: str | None = None


@dataclass(frozen=True)
class Bound:
    """The plain answer may settle ``request_id`` (if it is still pending)."""

    request_id: str


@dataclass(frozen=True)
class Unbound:
    """No single prompt: ``none`` open, ``several`` open, or prompts ``moved`` since the last one."""

    reason: Literal["none", "several", "moved"]


POLLS = ("m.poll.start", "org.matrix.msc3381.poll.start")  # choices a reader picks from


def _looks_like_prompt(content: Mapping[Any, Any]) -> bool:
    """The v2 key, the v1 card, or text a reader could take for a prompt
    (:func:`bot.answers.lookalike.looks_like_prompt`: body and HTML, the message's and an edit's new
    content; a reply's quote counts too, since what a client quotes is the replied-to event, which may
    itself be a fake)."""
    for c in (content, content.get("m.new_content")):
        if not isinstance(c, Mapping):
            continue
        if V2_KEY in c or CARD_KEY in c:
            return True
        body, html = c.get("body"), c.get("formatted_body")
        if looks_like_prompt(body if isinstance(body, str) else None, html if isinstance(html, str) else None):
            return True
    return False


def _request_id(content: object) -> str | None:
    if not isinstance(content, Mapping):
        return None
    rid = content.get("request_id")
    return rid if isinstance(rid, str) and rid else None


def sighting(event: Mapping[str, Any], *, bot_user_id: str) -> Sighting | None:
    """The timeline mark ``event`` makes, or ``None``.

    Plain messages that may be answers are marked by the daemon itself (``answer``), after
    :func:`bot.answers.classify`; here only encrypted events reserve their position.
    """
    if not isinstance(event, Mapping):
        return None
    etype, sender, event_id, content = (event.get(k) for k in ("type", "sender", "event_id", "content"))
    if not (isinstance(event_id, str) and event_id and isinstance(sender, str) and isinstance(content, Mapping)):
        return None
    if "state_key" in event:
        return None
    if etype == "m.room.encrypted":
        return Sighting(event_id, "answer")
    if etype in POLLS and sender != bot_user_id:
        return Sighting(event_id, "lookalike")
    if etype not in ("m.room.message", "m.sticker"):
        return None
    rel = content.get("m.relates_to")
    replaces = isinstance(rel, Mapping) and rel.get("rel_type") == "m.replace"
    if sender == bot_user_id:
        if replaces:
            new = content.get("m.new_content")
            if isinstance(new, Mapping) and isinstance(new.get("resolution"), Mapping):
                rid = _request_id(new)
                return Sighting(event_id, "settled", rid) if rid else None
            return None
        if content.get(V2_KEY) is not None:  # a prompt; one posted settled (a rule's) shows its request settled
            rid = _request_id(content)
            kind: Kind = "settled" if isinstance(content.get("resolution"), Mapping) else "posted"
            return Sighting(event_id, kind, rid) if rid else None
        return None
    if _looks_like_prompt(content):
        return Sighting(event_id, "lookalike")
    return None


def withdrawn(event: Mapping[str, Any], *, bot_user_id: str) -> str | None:
    """The event ``event`` changes out of what a reader sees: the target of an ``m.room.redaction``
    (``redacts``, top level or, from room version 11, in its content), or of someone else's edit
    (``m.replace``: a reader sees the new text in its place); else ``None``."""
    if not isinstance(event, Mapping):
        return None
    content = event.get("content")
    content = content if isinstance(content, Mapping) else {}
    if event.get("type") == "m.room.redaction":
        target = event.get("redacts") or content.get("redacts")
    elif event.get("type") == "m.room.message" and event.get("sender") != bot_user_id:
        rel = content.get("m.relates_to")
        target = rel.get("event_id") if isinstance(rel, Mapping) and rel.get("rel_type") == "m.replace" else None
    else:
        return None
    return target if isinstance(target, str) and target else None


def in_view(event: Mapping[str, Any]) -> bool:
    """Does a reader of the room's main timeline see ``event`` where it sits? Not a thread message
    (a thread shows only as a summary under its root); a reply, a plain message and a reaction (shown on
    its prompt) are seen."""
    content = event.get("content") if isinstance(event, Mapping) else None
    rel = content.get("m.relates_to") if isinstance(content, Mapping) else None
    return not (isinstance(rel, Mapping) and rel.get("rel_type") == "m.thread")


def bind(marks: Sequence[Mark], at: int) -> Bound | Unbound:
    """Which request a plain answer at position ``at`` may settle, from the marks before it.

    ``marks`` may hold anything; only the marks before ``at`` that change what a reader sees pending count, in
    room order: ``posted``/``settled``/``lookalike`` ones, a request's second ``settled`` mark (its edit after the
    room answer that settled it) left out.
    """
    posted: set[str | None] = set()
    settled: set[str | None] = set()
    last: Mark | None = None
    for m in sorted((m for m in marks if m.pos < at), key=lambda m: m.pos):
        if m.kind == "answer" or (m.kind == "settled" and m.request_id is not None and m.request_id in settled):
            continue
        if m.kind == "posted":
            posted.add(m.request_id)
        elif m.kind == "settled":
            settled.add(m.request_id)
        last = m
    open_ = posted - settled
    if not open_:
        return Unbound("none")
    if len(open_) > 1:
        return Unbound("several")
    (rid,) = open_
    if last is None or last.kind != "posted" or last.request_id != rid or rid is None:
        return Unbound("moved")
    return Bound(rid)
