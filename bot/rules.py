"""Allow/deny rules for `permissions watch` and the daemon's ``[[rules]]`` table (pure, no I/O but @FILE).

A rule (the wire form of agentproto's ``--rules-json``, seed 002)::

    {"match": {"toolName": "Read*", "sessionId": "s-abc"}, "decision": "approve",
     "scope": "always", "optionId": "allow_edits"}

- ``match`` needs at least one of ``toolName`` (a glob) and ``sessionId``.
- ``toolName`` is an :func:`fnmatch.fnmatchcase` glob, **case-sensitive** (``Bash`` is not ``bash``;
  write ``[Bb]ash`` for both). It matches a record when it matches any of the record's
  ``tool_name``, ``title`` or ``tool_kind`` (so ``execute`` matches every execute-kind call).
- ``sessionId`` matches the record's ``session_id`` or its ``label``, exactly.
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
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

__all__ = [
    "Rule",
    "RuleError",
    "RuleMatch",
    "build_rules",
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
    """What a rule matches: a tool-name glob and/or a session (id or label)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, populate_by_name=True)

    tool_name: str | None = Field(default=None, alias="toolName", min_length=1)
    session_id: str | None = Field(default=None, alias="sessionId", min_length=1)

    @model_validator(mode="after")
    def _needs_one(self) -> RuleMatch:
        if self.tool_name is None and self.session_id is None:
            raise ValueError("needs at least one of toolName or sessionId")
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
        if m.session_id is not None and m.session_id not in _session_keys(record):
            return False
        if m.tool_name is not None:
            names = _tool_names(record)
            if not any(fnmatch.fnmatchcase(n, m.tool_name) for n in names):
                return False
        return True

    def wire(self) -> dict[str, Any]:
        """The rule in its JSON form (camelCase keys, unset keys left out)."""
        return self.model_dump(by_alias=True, exclude_none=True)


def _str_values(record: Mapping[str, Any], *keys: str) -> list[str]:
    out: list[str] = []
    for k in keys:
        v = record.get(k)
        if isinstance(v, str) and v and v not in out:
            out.append(v)
    return out


def _tool_names(record: Mapping[str, Any]) -> list[str]:
    # ``toolName`` is agentproto's spelling of the same value; records from the daemon carry both.
    names = _str_values(record, "tool_name", "toolName", "title", "tool_kind")
    return names or [""]  # a record with no name at all still matches "*"


def _session_keys(record: Mapping[str, Any]) -> list[str]:
    return _str_values(record, "session_id", "sessionId", "label")


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


_KEYS = {(): "match, decision, scope, optionId", ("match",): "toolName, sessionId"}


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
    s = repr(v)
    return s if len(s) <= 40 else s[:39] + "…"


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


def restrict_to_session(rules: Sequence[Rule], session: str) -> list[Rule]:
    """``--session ID``: rules without a ``sessionId`` get this one; rules with their own keep it.

    A rule naming a different session then matches only a record whose id and label cover both
    (the watch also asks the daemon for that session's requests only).
    """
    if not session:
        raise RuleError("--session: the session id is empty")
    out: list[Rule] = []
    for r in rules:
        if r.match.session_id is None:
            r = r.model_copy(update={"match": r.match.model_copy(update={"session_id": session})})
        out.append(r)
    return out


def build_rules(
    tool_flags: Sequence[tuple[Decision, str]] = (),
    rules_json: str | None = None,
    *,
    session: str | None = None,
    always: bool = False,
) -> list[Rule]:
    """All of ``watch``'s rules: the tool flags in command-line order, then the ``--rules-json`` ones.

    ``always`` (``--always``) gives scope ``always`` to approve rules that set no scope of their own;
    ``session`` (``--session``) restricts every rule to that session (see :func:`restrict_to_session`).
    """
    rules = [flag_rule(d, p, always=always) for d, p in tool_flags]
    if rules_json is not None:
        for r in parse_rules_json(rules_json):
            if always and r.decision == "approve" and r.scope is None:
                r = r.model_copy(update={"scope": "always"})
            rules.append(r)
    if session is not None:
        rules = restrict_to_session(rules, session)
    return rules
