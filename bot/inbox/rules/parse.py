"""Rules from their data (JSON, TOML ``[[rules]]``, ``--rules-json`` or its ``@FILE``), validated
into :class:`~bot.inbox.rules.model.Rule`; what is wrong said in one line (:class:`RuleError`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from bot.inbox.rules.model import Rule
from bot.util.words import clip


class RuleError(ValueError):
    """A rule (or a list of rules) that cannot be used; the message is one line."""


_KEYS = {
    (): "match, decision, scope, optionId, approvals, answerers",
    ("answerers",): "users",
    ("match",): "toolName, kind, command, sessionId, label, room",
}


def describe(err: ValidationError) -> str:
    """One pydantic error as ``field.path: what is wrong (got X)``."""
    e = err.errors(include_url=False)[0]
    loc = tuple(_printable(str(p)) for p in e["loc"])
    kind = e["type"]
    got = f" (got {clip(repr(e.get('input')), 40)})"
    an_object = "must be an object" + got
    msg = {
        "missing": "is required",
        "extra_forbidden": f"unknown key (known: {_KEYS.get(loc[:-1], '?')})",
        "string_too_short": "must not be empty",
        "string_type": "must be a string" + got,
        "literal_error": f"must be {e.get('ctx', {}).get('expected', '?')}" + got,
        "model_type": an_object, "model_attributes_type": an_object, "dict_type": an_object,
    }.get(kind, str(e["msg"]).removeprefix("Value error, "))
    path = ".".join(loc)
    return f"{path}: {msg}" if path else msg


def _printable(s: str) -> str:
    """``s`` itself when printable, else its escaped form (messages stay on one line)."""
    return s if s.isprintable() else repr(s)


_KINDS = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}


def _kind(v: object) -> str:
    """A JSON-ish name for a value's type."""
    return "null" if v is None else _KINDS.get(type(v), type(v).__name__)


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
            raise RuleError(f"{source}: rule {i}: {describe(err)}") from None
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
