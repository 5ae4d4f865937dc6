"""What the answer parts pass around: a candidate (what an event says), a target (a prompt the bot
posted), and what comes of them (an answer to settle with, or a refusal to post)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from bot.events.states import Via


@dataclass(frozen=True)
class Candidate:
    """What an event says, before we know which prompts exist."""

    event_id: str
    sender: str
    via: Via
    prompt_event_id: str | None = None  # the event it replies to / threads under / reacts to
    request_id: str | None = None  # structured answers name it
    text: str | None = None  # text answers: reply fallback stripped, trimmed; structured: its ``text`` (own words)
    reaction_key: str | None = None
    option_id: str | None = None  # structured
    digest: str | None = None  # structured subject.digest if given
    revision: int | None = None  # structured subject.revision if given
    feedback: str | None = None
    explicit: bool = False  # addressed: reply, thread, reaction, structured
    problem: str | None = None  # a malformed structured payload: why resolve() must refuse it
    option_ids: tuple[str, ...] | None = None  # structured: several choices (a question's)


@dataclass(frozen=True)
class Asked:
    """What a question prompt (bot.events.kinds) asks: answers to it read several choices or free text."""

    text: str  # the question, the key of the agent's answers
    multi: bool  # several choices may be given
    free_text: bool  # the person's own words may be the answer (a reply, or in the prompt's thread)
    answer_type: str = "text"  # "number" / "integer": the words must be one


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
    question: Asked | None = None  # a question's prompt: its choices, then decline (the last option)


@dataclass(frozen=True)
class Answer:
    """A choice to settle ``request_id`` with (the daemon still checks the sender)."""

    request_id: str
    option_id: str
    via: Via
    feedback: str | None
    sender: str
    event_id: str
    session_rule: bool = False  # also add a session rule (the option is the allow-once one)
    answer: str | None = None  # a question's answer as given (labels joined by ", ", or the person's words)
    chosen: tuple[str, ...] = ()  # a question's: the option ids picked


RefusalKind = Literal["unparsable", "not_offered", "ambiguous", "stale", "not_pending", "unknown_request", "incomplete"]


@dataclass(frozen=True)
class Refusal:
    """An answer attempt that settles nothing; ``message`` is the notice to post."""

    kind: RefusalKind
    message: str
    request_id: str | None
