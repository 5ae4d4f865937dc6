"""Allow/deny rules for `permissions watch` and the daemon's ``[[rules]]`` table (pure, no I/O but @FILE).

A rule (the wire form of agentproto's ``--rules-json``, seed 002)::

    {"match": {"toolName": "Read*", "sessionId": "s-abc"}, "decision": "approve",
     "scope": "always", "optionId": "allow_edits"}

- ``match`` needs at least one of ``toolName``, ``kind``, ``command``, ``sessionId`` and ``label``;
  every field given must match. Each field matches only its own fact, never the agent's title:
- ``toolName`` is an :func:`fnmatch.fnmatchcase` glob, **case-sensitive** (``Bash`` is not ``bash``;
  write ``[Bb]ash`` for both), over the harness's tool name only (``tool_name``, e.g. from
  ``_meta.claudeCode.toolName``). A request without a tool name matches only ``*``.
- ``kind`` is a glob over the ACP tool kind (``read``, ``edit``, ``execute``...). The kind is what
  the agent declares: ``kind = "read"`` trusts the agent to say so.
- ``command`` is a glob over the command in ``rawInput.command`` (a list is joined as a shell line);
  a request without one never matches. The command is what would run, written by the model.
- ``sessionId`` matches the record's ``session_id`` exactly; the agent chooses its session ids.
- ``label`` matches the record's ``label`` exactly: the name the proxy (``--label``) or the
  submitter set, never a session id the agent chose.
- ``decision`` is ``approve`` or ``deny``; ``scope`` (``once``/``always``) is for approve rules only;
  ``optionId`` picks an exact option. Both are forwarded to the daemon verbatim.
- Unknown keys are refused, so a typo never silently widens or narrows a rule.

:func:`decide` lets deny rules win: if any deny rule matches, the first such deny rule is the
answer; otherwise the first matching approve rule; otherwise ``None`` (the request stays pending).
Rules are numbered from 1 in error messages and in ``watch`` output.
"""

from __future__ import annotations

import fnmatch
import json
import shlex
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from bot.words import clip

__all__ = [
    "Rule",
    "RuleError",
    "RuleMatch",
    "build_rules",
    "command_of",
    "decide",
    "flag_rule",
    "parse_rules",
    "parse_rules_json",
    "restrict_to_session",
]

Decision = Literal["approve", "deny"]
Scope = Literal["once", "always"]


class RuleError(ValueError):
    """A rule (or a list of rules) that cannot be used; the message is one line."""


class RuleMatch(BaseModel):
    """What a rule matches: globs over the tool name, kind and command; a session id; a label."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, populate_by_name=True)

    tool_name: str | None = Field(default=None, alias="toolName", min_length=1)
    kind: str | None = Field(default=None, min_length=1)
    command: str | None = Field(default=None, min_length=1)
    session_id: str | None = Field(default=None, alias="sessionId", min_length=1)
    label: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _needs_one(self) -> RuleMatch:
        if all(v is None for v in (self.tool_name, self.kind, self.command, self.session_id, self.label)):
            raise ValueError("needs at least one of toolName, kind, command, sessionId or label")
        return self


class Rule(BaseModel):
    """One allow/deny rule."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, populate_by_name=True)

    match: RuleMatch
    decision: Decision
    scope: Scope | None = None
    option_id: str | None = Field(default=None, alias="optionId", min_length=1)

    @model_validator(mode="after")
    def _scope_is_approve_only(self) -> Rule:
        if self.scope is not None and self.decision != "approve":
            raise ValueError(f"scope: only approve rules take a scope (this rule is {self.decision})")
        return self

    def matches(self, record: Mapping[str, Any]) -> bool:
        """Whether this rule's ``match`` fits a request record (see the module doc)."""
        m = self.match
        if m.session_id is not None and m.session_id != _first(record, "session_id", "sessionId"):
            return False
        if m.label is not None and m.label != _first(record, "label"):
            return False
        if m.tool_name is not None and not fnmatch.fnmatchcase(_first(record, "tool_name", "toolName"), m.tool_name):
            return False
        if m.kind is not None and not fnmatch.fnmatchcase(_first(record, "tool_kind"), m.kind):
            return False
        if m.command is not None:
            cmd = command_of(record)
            if cmd is None or not fnmatch.fnmatchcase(cmd, m.command):
                return False
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
    for k in keys:
        if k in record:
            v = record[k]
            return v if isinstance(v, str) else ""
    return ""


def command_of(record: Mapping[str, Any]) -> str | None:
    """The command in the record's raw input (``rawInput.command``): a string, or a list joined as a shell line."""
    raw = record.get("raw_input", record.get("rawInput"))
    cmd = raw.get("command") if isinstance(raw, Mapping) else None
    if isinstance(cmd, str):
        return cmd
    if isinstance(cmd, list) and cmd and all(isinstance(x, str) for x in cmd):
        return shlex.join(cmd)
    return None


def decide(rules: Iterable[Rule], record: Mapping[str, Any]) -> Rule | None:
    """The rule that settles ``record``: the first matching deny rule, else the first matching approve."""
    first_approve: Rule | None = None
    for rule in rules:
        if not rule.matches(record):
            continue
        if rule.decision == "deny":
            return rule
        if first_approve is None:
            first_approve = rule
    return first_approve


_KEYS = {(): "match, decision, scope, optionId", ("match",): "toolName, kind, command, sessionId, label"}


def _describe(err: ValidationError) -> str:
    """One pydantic error as ``field.path: what is wrong (got X)``."""
    e = err.errors(include_url=False)[0]
    loc = tuple(_printable(str(p)) for p in e["loc"])
    kind = e["type"]
    got = f" (got {_short(e.get('input'))})"
    if kind == "missing":
        msg = "is required"
    elif kind == "extra_forbidden":
        msg = f"unknown key (known: {_KEYS.get(loc[:-1], '?')})"
    elif kind == "string_too_short":
        msg = "must not be empty"
    elif kind == "string_type":
        msg = "must be a string" + got
    elif kind == "literal_error":
        msg = f"must be {e.get('ctx', {}).get('expected', '?')}" + got
    elif kind in ("model_type", "model_attributes_type", "dict_type"):
        msg = "must be an object" + got
    else:
        msg = str(e["msg"]).removeprefix("Value error, ")
    path = ".".join(loc)
    return f"{path}: {msg}" if path else msg


def _printable(s: str) -> str:
    """``s`` itself when printable, else its escaped form (messages stay on one line)."""
    return s if s.isprintable() else repr(s)


def _kind(v: object) -> str:
    """A JSON-ish name for a value's type."""
    names = {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "null",
    }
    return names.get(type(v), type(v).__name__)


def _short(v: object) -> str:
    return clip(repr(v), 40)


def parse_rules(data: object, *, source: str = "rules") -> list[Rule]:
    """Validate an already-parsed list of rule objects (JSON or TOML ``[[rules]]``). Raises RuleError."""
    if not isinstance(data, list):
        raise RuleError(f"{source}: must be a list of rule objects, got {_kind(data)}")
    rules: list[Rule] = []
    for i, item in enumerate(data, 1):
        if not isinstance(item, Mapping):
            raise RuleError(f"{source}: rule {i}: must be an object, got {_kind(item)}")
        try:
            rules.append(Rule.model_validate(dict(item)))
        except ValidationError as err:
            raise RuleError(f"{source}: rule {i}: {_describe(err)}") from None
        except RecursionError:
            raise RuleError(f"{source}: rule {i}: nested too deeply") from None
    return rules


def parse_rules_json(text: str) -> list[Rule]:
    """Rules from the ``--rules-json`` value: a JSON list, or ``@FILE`` naming a file that holds one."""
    source = "--rules-json"
    if text.startswith("@"):
        path = text[1:]
        source = f"--rules-json {_printable(text)}"
        if not path:
            raise RuleError("--rules-json: '@' needs a file name (@rules.json)")
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise RuleError(f"{source}: cannot read the file: {err}") from None
    try:
        data = json.loads(text)
    except RecursionError:
        raise RuleError(f"{source}: invalid JSON: nested too deeply") from None
    except ValueError as err:
        raise RuleError(f"{source}: invalid JSON: {err}") from None
    return parse_rules(data, source=source)


def flag_rule(decision: Decision, pattern: str, *, session: str | None = None, always: bool = False) -> Rule:
    """The rule for ``--allow-tool PAT`` (approve) or ``--deny-tool PAT`` (deny)."""
    flag = "--allow-tool" if decision == "approve" else "--deny-tool"
    if not pattern:
        raise RuleError(f"{flag}: the pattern is empty")
    match: dict[str, str] = {"toolName": pattern}
    if session is not None:
        match["sessionId"] = session
    data: dict[str, Any] = {"match": match, "decision": decision}
    if always and decision == "approve":
        data["scope"] = "always"
    try:
        return Rule.model_validate(data)
    except ValidationError as err:  # pragma: no cover - the inputs above are always well-formed
        raise RuleError(f"{flag} {pattern}: {_describe(err)}") from None


def restrict_to_session(rules: Sequence[Rule], session: str | None = None, *, label: str | None = None) -> list[Rule]:
    """``--session ID`` / ``--label NAME``: rules without their own get it; rules with their own keep it.

    A rule naming a different session (or label) then matches nothing the restriction lets through
    (the watch also asks the daemon for that session's requests only).
    """
    if session is not None and not session:
        raise RuleError("--session: the session id is empty")
    if label is not None and not label:
        raise RuleError("--label: the label is empty")
    out: list[Rule] = []
    for r in rules:
        update: dict[str, str] = {}
        if session is not None and r.match.session_id is None:
            update["session_id"] = session
        if label is not None and r.match.label is None:
            update["label"] = label
        if update:
            r = r.model_copy(update={"match": r.match.model_copy(update=update)})
        out.append(r)
    return out


def build_rules(
    tool_flags: Sequence[tuple[Decision, str]] = (),
    rules_json: str | None = None,
    *,
    session: str | None = None,
    label: str | None = None,
    always: bool = False,
) -> list[Rule]:
    """All of ``watch``'s rules: the tool flags in command-line order, then the ``--rules-json`` ones.

    ``always`` (``--always``) gives scope ``always`` to approve rules that set no scope of their own;
    ``session`` (``--session``) and ``label`` (``--label``) restrict every rule (see :func:`restrict_to_session`).
    """
    rules = [flag_rule(d, p, always=always) for d, p in tool_flags]
    if rules_json is not None:
        for r in parse_rules_json(rules_json):
            if always and r.decision == "approve" and r.scope is None:
                r = r.model_copy(update={"scope": "always"})
            rules.append(r)
    if session is not None or label is not None:
        rules = restrict_to_session(rules, session, label=label)
    return rules
