"""One permission request as the inbox keeps it, and its API form."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.events.states import State, Via
from bot.events.timestamps import iso_ms

PENDING, RESOLVED, EXPIRED, CANCELLED = State.PENDING, State.RESOLVED, State.EXPIRED, State.CANCELLED  # old names
STATES = tuple(State)
SETTLED = (RESOLVED, EXPIRED, CANCELLED)
VIAS = tuple(Via)


@dataclass(frozen=True)
class Outcome:
    """How a request was settled. ``option_id`` None means cancelled."""

    option_id: str | None
    answered_by: str
    via: Via
    feedback: str | None
    decided_at: float
    answers: dict[str, str] | None = None  # a question's: its text -> the answer as given
    chosen: list[str] | None = None  # a question's: the option ids picked (none for the person's own words)


@dataclass(frozen=True)
class Settlement:
    """How ``Inbox.settle`` is to settle a pending request; ``ValueError`` when it is no way to settle one.

    ``state`` defaults to resolved (cancelled when ``option_id`` is None). ``event_id``: the room event that
    settles it, marked handled in the same transaction; with ``in_view`` (a room answer seen where it sits,
    bot.answers.timeline.in_view) its place in the timeline becomes the ``settled`` mark. ``ledger_by``: whom
    the ledger entry names when ``by`` does not say it all (``rule:N``, every approver of a quorum).
    ``answers`` and ``chosen``: as in ``Outcome``. ``person``: through the API, whom the deciding token
    belongs to (a quorum counts that person)."""

    option_id: str | None
    by: str
    via: Via
    now: float
    feedback: str | None = None
    state: State | None = None
    event_id: str | None = None
    in_view: bool = False
    ledger_by: Sequence[str] | None = None
    answers: dict[str, str] | None = None
    chosen: list[str] | None = None
    person: str | None = None

    def __post_init__(self) -> None:
        if self.state is None:
            object.__setattr__(self, "state", RESOLVED if self.option_id is not None else CANCELLED)
        elif self.state not in SETTLED:
            raise ValueError(f"a request is settled resolved, expired or cancelled, not {self.state!r}")


API_AS_IS = ("id", "session_id", "request_seq", "label", "cwd", "tool_call_id", "title", "tool_kind", "tool_name",
             "options", "raw_input", "locations", "state")
"""The first fields of the API record, as the record holds them (in this order)."""


@dataclass(frozen=True)
class Record:
    """A request and everything durable about it."""

    id: str
    session_id: str
    request_seq: int
    key: str | None
    label: str | None
    tool_call_id: str
    title: str
    tool_kind: str | None
    tool_name: str | None
    options: list[dict[str, Any]]
    raw_input: Any
    locations: list[dict[str, Any]]
    content: list[dict[str, Any]]
    params: dict[str, Any]
    digest: str
    revision: int
    state: State
    requested_at: float
    expires_at: float
    prompt_event_id: str | None
    prompt_edited: bool
    outcome: Outcome | None
    cwd: str | None = None  # the asking session's working directory, when the submitter said
    submitted_by: str | None = None  # the API token's name
    room: str = "default"  # the station room's name ([[rooms]]; "default": [matrix] room)
    approvals_needed: int = 0  # distinct approvers needed (an ask rule's approvals); 0 or 1: one answer settles
    approvers: list[str] | None = None  # who may answer it (an ask rule's answerers); None: the room's
    approvals: list[dict[str, Any]] = field(default_factory=list)  # {by, at, option_id} so far
    approvals_shown: int = 0  # how many of them the prompt shows
    escalated_at: float | None = None  # when it was escalated (bot.service.escalation), once
    escalated_to: list[str] | None = None  # who was mentioned then: they may answer it
    kind: str = "permission"  # bot.events.kinds.Kind: permission, question or plan

    @property
    def quorum(self) -> bool:
        """Whether more than one approval settles it."""
        return self.approvals_needed > 1

    @property
    def pending(self) -> bool:
        return self.state == PENDING

    def option_name(self, option_id: str | None) -> str | None:
        return next((str(o["name"]) for o in self.options if o["optionId"] == option_id), None)

    def question(self) -> str:
        """agentproto's one-line question: ``Allow "Bash"?`` (a question's own text, a plan's title)."""
        if self.kind != "permission":
            return self.title
        return f'Allow "{self.tool_name or self.title}"?'

    def to_api(self) -> dict[str, Any]:
        """The JSON record of the HTTP API (snake_case plus agentproto's camelCase names)."""
        out: dict[str, Any] | None = None
        if self.outcome is not None:
            o = self.outcome
            out = {
                "option_id": o.option_id,
                "option_name": self.option_name(o.option_id),
                "answered_by": o.answered_by,
                "via": o.via,
                "feedback": o.feedback,
                "decided_at": iso_ms(o.decided_at),
            }
            if o.answers is not None:
                out["answers"] = o.answers
                out["chosen"] = o.chosen or []
        requested = iso_ms(self.requested_at)
        return {k: getattr(self, k) for k in API_AS_IS} | {
            "requested_at": requested,
            "expires_at": iso_ms(self.expires_at),
            "revision": self.revision,
            "digest": self.digest,
            "prompt_event_id": self.prompt_event_id,
            "outcome": out,
            "submitted_by": self.submitted_by,
            "room": self.room,
            "approvals": {  # a quorum's: needed, and given (by, at)
                "needed": self.approvals_needed,
                "given": [{"by": a["by"], "at": iso_ms(float(a["at"]))} for a in self.approvals],
            } if self.quorum else None,
            "escalated_at": None if self.escalated_at is None else iso_ms(self.escalated_at),
            "kind": self.kind,
            "params": self.params,
            "sessionId": self.session_id,
            "toolCallId": self.tool_call_id,
            "toolName": self.tool_name or self.title,
            "text": self.question(),
            "rawInput": self.raw_input,
            "requestedAt": requested,
        }


def dumps(v: Any) -> str:
    """Compact JSON for the store."""
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)
