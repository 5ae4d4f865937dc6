"""What a rule is and what it matches (pure): the strict pydantic models, and :func:`decide`
(the first matching deny rule, else the first matching approve). The format: :mod:`bot.inbox.rules`."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from bot.prompts.shown import Shown, shown_input

Decision = Literal["approve", "deny", "ask"]
Scope = Literal["once", "always"]


class RuleMatch(BaseModel):
    """What a rule matches: globs over the tool name, kind and command; a session id; a label; a station room."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, populate_by_name=True)

    tool_name: str | None = Field(default=None, alias="toolName", min_length=1)
    kind: str | None = Field(default=None, min_length=1)
    command: str | None = Field(default=None, min_length=1)
    session_id: str | None = Field(default=None, alias="sessionId", min_length=1)
    label: str | None = Field(default=None, min_length=1)
    room: str | None = Field(default=None, min_length=1)  # a station room's name (the daemon chose it)

    @model_validator(mode="after")
    def _needs_one(self) -> RuleMatch:
        if all(v is None for v in (self.tool_name, self.kind, self.command, self.session_id, self.label, self.room)):
            raise ValueError("needs at least one of toolName, kind, command, sessionId, label or room")
        return self


class RuleAnswerers(BaseModel):
    """Who may answer the requests an ``ask`` rule matches (instead of the room's answerers)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    users: list[str] = Field(min_length=1)

    @model_validator(mode="after")
    def _users(self) -> RuleAnswerers:
        for i, u in enumerate(self.users):
            if not (u.startswith("@") and ":" in u and len(u) <= 255 and u.isprintable()):
                raise ValueError(f"users.{i}: must be a Matrix user id (@name:server)")
        return self


class Rule(BaseModel):
    """One allow/deny rule, or an ``ask`` rule: asked, with ``approvals`` distinct approvers needed."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, populate_by_name=True)

    match: RuleMatch
    decision: Decision
    scope: Scope | None = None
    option_id: str | None = Field(default=None, alias="optionId", min_length=1)
    approvals: int | None = Field(default=None, ge=1, le=10)
    answerers: RuleAnswerers | None = None

    @model_validator(mode="after")
    def _scope_is_approve_only(self) -> Rule:
        if self.scope is not None and self.decision != "approve":
            raise ValueError(f"scope: only approve rules take a scope (this rule is {self.decision})")
        if self.decision != "ask" and (self.approvals is not None or self.answerers is not None):
            raise ValueError(f"approvals, answerers: only ask rules take them (this rule is {self.decision})")
        if self.decision == "ask" and self.option_id is not None:
            raise ValueError("optionId: an ask rule settles nothing")
        return self

    def matches(self, record: Mapping[str, Any]) -> bool:
        """Whether this rule's ``match`` fits a request record (see the module doc)."""
        m = self.match
        if m.session_id is not None and m.session_id != _first(record, "session_id", "sessionId"):
            return False
        if m.label is not None and m.label != _first(record, "label"):
            return False
        if m.room is not None and m.room != (record.get("room") or "default"):
            return False
        if m.tool_name is not None and not fnmatch.fnmatchcase(_first(record, "tool_name", "toolName"), m.tool_name):
            return False
        if m.kind is not None and not fnmatch.fnmatchcase(_first(record, "tool_kind"), m.kind):
            return False
        if m.command is not None:
            shown = shown_of(record)
            if shown.command is None or not fnmatch.fnmatchcase(shown.command, m.command):
                return False
            if self.decision == "approve" and (shown.env or shown.escalates):
                return False  # the glob says nothing of the environment or the sandbox: a person decides
        return True

    def wire(self) -> dict[str, Any]:
        """The rule in its JSON form (camelCase keys, unset keys left out)."""
        return self.model_dump(by_alias=True, exclude_none=True)


def _first(record: Mapping[str, Any], *keys: str) -> str:
    """The value of the first of ``keys`` the record has, as a string (``""`` when none or not a string).

    The first key present wins even when empty: the daemon's records carry ``tool_name`` and, for
    agentproto's clients, ``toolName`` (which falls back to the title); only a record without the
    first spelling is read by the second.
    """
    v = next((record[k] for k in keys if k in record), "")
    return v if isinstance(v, str) else ""


def shown_of(record: Mapping[str, Any]) -> Shown:
    """What the prompt shows of the record's raw input (never its title): see :mod:`bot.prompts.shown`."""
    return shown_input(record.get("raw_input", record.get("rawInput")))


def decide(rules: Iterable[Rule], record: Mapping[str, Any]) -> Rule | None:
    """The rule for ``record``: the first matching deny rule, else the first matching ask rule (a person
    decides: no approve rule skips it), else the first matching approve."""
    first: dict[str, Rule] = {}
    for rule in rules:
        if not rule.matches(record):
            continue
        if rule.decision == "deny":
            return rule
        first.setdefault(rule.decision, rule)
    return first.get("ask") or first.get("approve")
