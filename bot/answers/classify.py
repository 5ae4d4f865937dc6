"""Step 1: one raw room event (``event.source`` from nio) -> what it could answer (a ``Candidate``),
or ``None``. Replies, threads and plain text are read here; reactions and structured payloads by their
own parts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.answers.model import Candidate
from bot.answers.reactions import classify_reaction
from bot.answers.structured import classify_structured, nonempty_str
from bot.events.models import ANSWER_KEY
from bot.events.states import Via


@dataclass(frozen=True)
class _Rel:
    rel_type: str | None
    event_id: str | None
    in_reply_to: str | None


def classify(event: Mapping[str, Any], *, bot_user_id: str) -> Candidate | None:
    """Say what ``event`` could answer, or ``None`` when it cannot be an answer at all.

    Not answers: the bot's own events, anything but ``m.room.message`` / ``m.reaction``,
    redacted events, edits, notices, prompts (``suite_event_type`` or a v1 card), other
    message types than ``m.text`` (unless structured), and any malformed field.
    """
    if not isinstance(event, Mapping):
        return None
    etype, sender, event_id = event.get("type"), event.get("sender"), event.get("event_id")
    content = event.get("content")
    if not (isinstance(etype, str) and nonempty_str(sender) and nonempty_str(event_id)
            and isinstance(content, Mapping)):
        return None
    if sender == bot_user_id or "state_key" in event:
        return None
    unsigned = event.get("unsigned")
    if unsigned is not None and (not isinstance(unsigned, Mapping) or "redacted_because" in unsigned):
        return None
    if etype == "m.reaction":
        return classify_reaction(content, sender, event_id)
    if etype == "m.room.message":
        return _classify_message(content, sender, event_id)
    return None


def _relation(content: Mapping[Any, Any]) -> _Rel | None:
    """The message's relation, or ``None`` when ``m.relates_to`` is malformed."""
    if "m.relates_to" not in content:
        return _Rel(None, None, None)
    rel = content["m.relates_to"]
    if not isinstance(rel, Mapping):
        return None
    rel_type, rel_event = rel.get("rel_type"), rel.get("event_id")
    if ("rel_type" in rel and not nonempty_str(rel_type)) or (
        "event_id" in rel and not nonempty_str(rel_event)
    ):
        return None
    if "is_falling_back" in rel and not isinstance(rel["is_falling_back"], bool):
        return None
    reply_to: str | None = None
    if "m.in_reply_to" in rel:
        irt = rel["m.in_reply_to"]
        if not isinstance(irt, Mapping) or not nonempty_str(irt.get("event_id")):
            return None
        reply_to = irt["event_id"]
    return _Rel(rel_type, rel_event, reply_to)


def _classify_message(content: Mapping[Any, Any], sender: str, event_id: str) -> Candidate | None:
    msgtype = content.get("msgtype")
    if "msgtype" in content and not isinstance(msgtype, str):
        return None
    if msgtype == "m.notice":
        return None
    if "suite_event_type" in content or "dev.agentpod.permission" in content:
        return None  # a prompt (ours or another bot's), never an answer
    if "m.new_content" in content:
        return None
    body = content.get("body")
    if "body" in content and not isinstance(body, str):
        return None
    rel = _relation(content)
    if rel is None or rel.rel_type == "m.replace":
        return None
    if rel.rel_type == "m.thread":
        if rel.event_id is None:
            return None
        addressed: str | None = rel.event_id  # the thread root, even when in_reply_to is set
    elif rel.in_reply_to is not None:
        addressed = rel.in_reply_to
    elif rel.rel_type is not None or rel.event_id is not None:
        return None  # some other relation: neither a reply nor a plain message
    else:
        addressed = None

    if ANSWER_KEY in content:
        return classify_structured(content[ANSWER_KEY], sender, event_id, addressed)
    if msgtype != "m.text" or not isinstance(body, str):
        return None
    text = strip_reply_fallback(body) if rel.in_reply_to is not None else body
    return Candidate(event_id, sender, Via.MATRIX, addressed, text=text.strip(), explicit=addressed is not None)


def strip_reply_fallback(body: str) -> str:
    """Drop the leading ``> `` quote lines (and the blank line after them) of a reply."""
    lines = body.split("\n")
    i = 0
    while i < len(lines) and (lines[i].startswith("> ") or lines[i].rstrip("\r") == ">"):
        i += 1
    if i == 0:
        return body
    if i < len(lines) and not lines[i].strip():
        i += 1
    return "\n".join(lines[i:])
