"""Matrix events -> answers to permission prompts. Pure: no I/O, no clock.

Two steps so the daemon can look things up in between:

1. :func:`classify` reads one raw room event (``event.source`` from nio) and
   says what it could be an answer to (a :class:`Candidate`), or ``None``.
2. The daemon finds the prompt the candidate addresses (by ``prompt_event_id``
   for replies, threads, reactions and addressed structured answers; by
   ``request_id`` for other structured answers; by the room timeline,
   :mod:`bot.timeline`, for plain messages) and the pending prompts, then
   :func:`resolve` turns them into an
   :class:`Answer`, a :class:`Refusal` (a notice to post) or ``None`` (ignore).

Neither function decides *who* may answer, and neither raises on bad input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from bot.answer_text import KEYCAPS, NoSuchNumber, Pick, keycap_index, parse
from bot.events.models import ANSWER_KEY
from bot.inbox.states import Via
from bot.prompts.text import prose
from bot.session_rules import ALIASES as SESSION_ALIASES
from bot.session_rules import REACTION as SESSION_REACTION

__all__ = [
    "ANSWER_KEY",
    "KEYCAPS",
    "SHORTCUTS",
    "Answer",
    "Candidate",
    "Refusal",
    "Target",
    "classify",
    "keycap_index",
    "resolve",
    "strip_reply_fallback",
]

SHORTCUTS = {"\u2705": "allow_once", "\u274c": "reject_once"}
"""Reactions that pick an option by its ACP kind: ✅ allow once, ❌ reject once."""


ROOM_VIAS = (Via.MATRIX, Via.REACTION, Via.STRUCTURED)
"""The ways an answer comes from the room."""


@dataclass(frozen=True)
class Candidate:
    """What an event says, before we know which prompts exist."""

    event_id: str
    sender: str
    via: Via
    prompt_event_id: str | None  # the event it replies to / threads under / reacts to
    request_id: str | None  # structured answers name it
    text: str | None  # text answers: reply fallback stripped, trimmed
    reaction_key: str | None
    option_id: str | None  # structured
    digest: str | None  # structured subject.digest if given
    revision: int | None  # structured subject.revision if given
    feedback: str | None
    explicit: bool  # addressed: reply, thread, reaction, structured
    problem: str | None = None  # a malformed structured payload: why resolve() must refuse it


@dataclass(frozen=True)
class Target:
    """A prompt the bot posted (from the durable inbox)."""

    request_id: str
    prompt_event_id: str | None
    options: Sequence[tuple[str, str]]  # (option_id, label) in the body's order, numbered from 1
    digest: str
    revision: int
    pending: bool
    kinds: Sequence[str] = ()  # the ACP kind of each option, same order (for ✅ / ❌)
    complete: bool = True  # the prompt showed everything; if not, only an addressed answer counts
    session: str | None = None  # the "Allow for this session" line when offered, numbered after the options


@dataclass(frozen=True)
class Answer:
    """A choice to settle ``request_id`` with (the daemon still checks the sender)."""

    request_id: str
    option_id: str
    via: Via  # one of ROOM_VIAS
    feedback: str | None
    sender: str
    event_id: str
    session_rule: bool = False  # also add a session rule (the option is the allow-once one)


RefusalKind = Literal["unparsable", "ambiguous", "stale", "not_pending", "unknown_request", "incomplete"]


@dataclass(frozen=True)
class Refusal:
    """An answer attempt that settles nothing; ``message`` is the notice to post."""

    kind: RefusalKind
    message: str
    request_id: str | None


# --------------------------------------------------------------------------- classify


@dataclass(frozen=True)
class _Rel:
    rel_type: str | None
    event_id: str | None
    in_reply_to: str | None


def _nonempty_str(value: object) -> bool:
    return isinstance(value, str) and bool(value)


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
    if not (
        isinstance(etype, str)
        and isinstance(sender, str)
        and sender
        and isinstance(event_id, str)
        and event_id
        and isinstance(content, Mapping)
    ):
        return None
    if sender == bot_user_id or "state_key" in event:
        return None
    unsigned = event.get("unsigned")
    if unsigned is not None:
        if not isinstance(unsigned, Mapping) or "redacted_because" in unsigned:
            return None
    if etype == "m.reaction":
        return _classify_reaction(content, sender, event_id)
    if etype == "m.room.message":
        return _classify_message(content, sender, event_id)
    return None


def _classify_reaction(content: Mapping[Any, Any], sender: str, event_id: str) -> Candidate | None:
    rel = content.get("m.relates_to")
    if not isinstance(rel, Mapping) or rel.get("rel_type") != "m.annotation":
        return None
    target, key = rel.get("event_id"), rel.get("key")
    if not (isinstance(target, str) and target and isinstance(key, str) and key):
        return None
    return Candidate(
        event_id=event_id,
        sender=sender,
        via=Via.REACTION,
        prompt_event_id=target,
        request_id=None,
        text=None,
        reaction_key=key,
        option_id=None,
        digest=None,
        revision=None,
        feedback=None,
        explicit=True,
    )


def _relation(content: Mapping[Any, Any]) -> _Rel | None:
    """The message's relation, or ``None`` when ``m.relates_to`` is malformed."""
    if "m.relates_to" not in content:
        return _Rel(None, None, None)
    rel = content["m.relates_to"]
    if not isinstance(rel, Mapping):
        return None
    rel_type, rel_event = rel.get("rel_type"), rel.get("event_id")
    if ("rel_type" in rel and not _nonempty_str(rel_type)) or (
        "event_id" in rel and not _nonempty_str(rel_event)
    ):
        return None
    if "is_falling_back" in rel and not isinstance(rel["is_falling_back"], bool):
        return None
    reply_to: str | None = None
    if "m.in_reply_to" in rel:
        irt = rel["m.in_reply_to"]
        if not isinstance(irt, Mapping) or not _nonempty_str(irt.get("event_id")):
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
        return _classify_structured(content[ANSWER_KEY], sender, event_id, addressed)
    if msgtype != "m.text" or not isinstance(body, str):
        return None
    text = strip_reply_fallback(body) if rel.in_reply_to is not None else body
    return Candidate(
        event_id=event_id,
        sender=sender,
        via=Via.MATRIX,
        prompt_event_id=addressed,
        request_id=None,
        text=text.strip(),
        reaction_key=None,
        option_id=None,
        digest=None,
        revision=None,
        feedback=None,
        explicit=addressed is not None,
    )


def _classify_structured(
    payload: object, sender: str, event_id: str, addressed: str | None
) -> Candidate | None:
    """A structured answer; JSON ``null`` in an optional field counts as absent."""
    if not isinstance(payload, Mapping):
        return None
    request_id = payload.get("request_id")
    if not isinstance(request_id, str) or not request_id.strip():
        return None
    problems: list[str] = []
    option_id = payload.get("option_id")
    if not _nonempty_str(option_id):
        problems.append("option_id is missing" if option_id in (None, "") else "option_id is not text")
        option_id = None
    digest: str | None = None
    revision: int | None = None
    subject = payload.get("subject")
    if isinstance(subject, Mapping):
        d, r = subject.get("digest"), subject.get("revision")
        if d is not None:
            if _nonempty_str(d):
                digest = d
            else:
                problems.append("subject.digest is not text")
        if r is not None:
            if isinstance(r, int) and not isinstance(r, bool):
                revision = r
            else:
                problems.append("subject.revision is not a whole number")
    elif subject is not None:
        problems.append("subject is not an object")
    feedback = payload.get("feedback")
    if feedback is not None and not isinstance(feedback, str):
        problems.append("feedback is not text")
        feedback = None
    return Candidate(
        event_id=event_id,
        sender=sender,
        via=Via.STRUCTURED,
        prompt_event_id=addressed,
        request_id=request_id,
        text=None,
        reaction_key=None,
        option_id=option_id,
        digest=digest,
        revision=revision,
        feedback=(feedback.strip() or None) if feedback is not None else None,
        explicit=True,
        problem="; ".join(problems) or None,
    )


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


# --------------------------------------------------------------------------- resolve


def _show(text: str, limit: int = 40) -> str:
    """A name fit for a one-line notice: shown as agent prose (one line, visible, no mention), shortened."""
    return prose(text, limit)


def _shown(target: Target) -> list[tuple[str, str]]:
    """The numbered lines of the prompt: the options, then "Allow for this session" when offered."""
    return [*target.options, ("session", target.session)] if target.session else list(target.options)


def _parse(text: str, target: Target) -> Pick | NoSuchNumber | None:
    """:func:`bot.answer_text.parse` over the prompt's numbered lines (``s`` / ``session`` name the last)."""
    if not target.session:
        return parse(text, target.options)
    return parse(text, _shown(target), dict.fromkeys(SESSION_ALIASES, len(target.options)))


def _choices(target: Target) -> str:
    n = len(_shown(target))
    if n == 0:
        return "This prompt offers no options."
    listed = ", ".join(f"{i}. {_show(label or oid)}" for i, (oid, label) in enumerate(_shown(target), 1))
    if n == 1:
        return f"Answer with 1 or the option's name: {listed}."
    return f"Answer with a number 1–{n} or an option's name: {listed}."


def _unparsable(target: Target, lead: str = "") -> Refusal:
    return Refusal("unparsable", f"{lead}{_choices(target)}", target.request_id)


def _not_pending(target: Target) -> Refusal:
    return Refusal(
        "not_pending", f"Request {_show(target.request_id, 80)} is already settled.", target.request_id
    )


def _answer(c: Candidate, target: Target, index: int, feedback: str | None) -> Answer:
    if target.session and index == len(target.options):  # allow once, and a session rule
        once = target.options[list(target.kinds).index("allow_once")][0]
        return Answer(target.request_id, once, c.via, feedback, c.sender, c.event_id, session_rule=True)
    return Answer(target.request_id, target.options[index][0], c.via, feedback, c.sender, c.event_id)


def resolve(c: Candidate, target: Target | None, pending: Sequence[Target]) -> Answer | Refusal | None:
    """Decide what ``c`` does.

    ``target`` is the prompt ``c`` addresses (``None`` if it addresses nothing known); for a
    plain message, the one prompt its sender could have meant (:func:`bot.timeline.bind`) or
    ``None`` (then the bot asks which, if the text answers any of ``pending``).
    ``pending`` all pending prompts, oldest first. ``None`` means: not an answer, stay quiet.
    """
    if c.via == Via.STRUCTURED:
        return _resolve_structured(c, target)
    if c.via == Via.REACTION:
        return _resolve_reaction(c, target)
    if c.via == Via.MATRIX:
        return _resolve_text(c, target, [t for t in pending if t.pending])
    return None


def _resolve_text(c: Candidate, target: Target | None, live: Sequence[Target]) -> Answer | Refusal | None:
    text = c.text.strip() if isinstance(c.text, str) else ""
    if c.explicit:
        if target is None:
            return None  # a reply to something that is not a prompt: ordinary chat
        parsed = _parse(text, target)
        if not target.pending:
            # Only answer-like text gets the notice; talk under a settled prompt is left alone.
            return _not_pending(target) if parsed is not None else None
        if isinstance(parsed, Pick):
            return _answer(c, target, parsed.index, parsed.feedback)
        if isinstance(parsed, NoSuchNumber):
            return _unparsable(target, f"There is no option {parsed.number}. ")
        if len(text.split()) > 1:
            return None  # conversation ("1 sec, let me check"): left alone, no notice
        return _unparsable(target)  # one word that is no option ("yes"): say what the answers are
    if target is not None:  # the one prompt the sender could have meant (bot.timeline.bind)
        parsed = _parse(text, target)
        if not isinstance(parsed, Pick):
            return None
        if not target.pending:
            return _not_pending(target)
        if not target.complete:
            return _incomplete(target)
        return _answer(c, target, parsed.index, parsed.feedback)
    if any(isinstance(_parse(text, t), Pick) for t in live):
        return _ask(live)
    return None


def _ask(live: Sequence[Target]) -> Refusal:
    """Which prompt does a plain answer mean? Resolves nothing."""
    ids = [_show(t.request_id, 60) for t in live]
    shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
    waiting = f"{len(live)} requests are waiting ({shown})" if len(live) > 1 else f"Request {shown} is waiting"
    return Refusal(
        "ambiguous",
        f"Which request do you mean? {waiting}. Reply to the prompt you mean: a plain answer counts only "
        "for the one open prompt just above it.",
        None,
    )


def _incomplete(target: Target) -> Refusal:
    return Refusal(
        "incomplete",
        f"The prompt for {_show(target.request_id, 80)} was shortened, so a plain answer cannot settle it. "
        "Read the full text in its thread, then reply to the prompt (or answer in its thread).",
        target.request_id,
    )


def _resolve_reaction(c: Candidate, target: Target | None) -> Answer | Refusal | None:
    key = c.reaction_key if isinstance(c.reaction_key, str) else ""
    bare = key.replace("\ufe0f", "").replace("\ufe0e", "")
    kind = SHORTCUTS.get(bare)
    number = keycap_index(key)
    if bare == SESSION_REACTION:
        number = len(target.options) + 1 if target is not None and target.session else 0
    if (number is None and kind is None) or target is None:
        return None
    if not target.pending:
        return _not_pending(target)
    if number == 0:
        return _unparsable(target, "This prompt offers no allow-for-this-session option. ")
    if kind is not None:
        if kind not in target.kinds:
            return _unparsable(target, f"This prompt offers no {kind.replace('_', ' ')} option. ")
        return _answer(c, target, list(target.kinds).index(kind), None)
    if number is None or number > len(_shown(target)):
        return _unparsable(target, f"There is no option {number}. ")
    return _answer(c, target, number - 1, None)


def _resolve_structured(c: Candidate, target: Target | None) -> Answer | Refusal | None:
    rid = c.request_id if isinstance(c.request_id, str) else None
    if target is None and c.prompt_event_id is not None:
        return Refusal(
            "unknown_request",
            f"The structured answer for {_show(rid or '', 80)} replies to an event that is not its prompt.",
            rid,
        )
    if target is None:
        if not rid:
            return Refusal("unknown_request", "The structured answer names no request.", None)
        return Refusal("unknown_request", f"No request {_show(rid, 80)} is known.", rid)
    if rid != target.request_id:
        return Refusal(
            "unparsable",
            f"The structured answer names request {_show(rid or '', 80)} but was sent to the prompt for "
            f"{_show(target.request_id, 80)}.",
            target.request_id,
        )
    if not target.pending:
        return _not_pending(target)
    if c.problem:
        return Refusal("unparsable", f"The structured answer is malformed: {c.problem}.", rid)
    changed = []
    if c.digest is not None and c.digest != target.digest:
        changed.append("its content")
    if c.revision is not None and c.revision != target.revision:
        changed.append(f"its revision (now {target.revision})")
    if changed:
        return Refusal(
            "stale",
            f"The prompt for {_show(rid, 80)} has changed ({' and '.join(changed)}). "
            "Answer the current prompt.",
            rid,
        )
    ids = [oid for oid, _ in target.options]
    if not c.option_id:
        return Refusal("unparsable", "The structured answer names no option.", rid)
    if c.option_id not in ids:
        offered = ", ".join(_show(i) for i in ids) or "none"
        return Refusal(
            "unparsable",
            f"Option {_show(c.option_id, 60)} is not offered for {_show(rid, 80)}. Offered: {offered}.",
            rid,
        )
    feedback = c.feedback if isinstance(c.feedback, str) and c.feedback.strip() else None
    return _answer(c, target, ids.index(c.option_id), feedback)
