"""The packaged JSON Schema of ``dev.agentpod.permission.v2`` (bot/schemas/) and a check by it: the tests'
second opinion beside bot.events' models.

Needs ``jsonschema`` (a test dependency), imported on first use. The schema says what the models say;
``schema_verdict`` adds the ``x-uniqueBy`` rule JSON Schema cannot state, and refuses lone surrogates
like the models do.
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import TYPE_CHECKING, Any

from bot.events._util import join_path, short, unicode_problem
from bot.events.timestamps import is_rfc3339

if TYPE_CHECKING:  # jsonschema is a test/tool dependency: imported only when a schema check runs
    from jsonschema import Draft202012Validator, FormatChecker  # type: ignore[import-untyped]

SCHEMA_NAME = "dev.agentpod.permission.v2.json"


def load_schema() -> dict[str, Any]:
    """A fresh copy of the packaged schema (``bot/schemas/dev.agentpod.permission.v2.json``)."""
    return dict(json.loads(_schema_text()))


@cache
def _schema_text() -> str:
    return files("bot").joinpath("schemas", SCHEMA_NAME).read_text(encoding="utf-8")


def format_checker() -> FormatChecker:
    """A format checker that knows exactly one format: ``date-time``, by ``is_rfc3339``."""
    from jsonschema import FormatChecker

    def date_time(instance: object) -> bool:
        return not isinstance(instance, str) or is_rfc3339(instance)

    checker = FormatChecker(formats=())
    checker.checks("date-time")(date_time)
    return checker


@cache
def _validator() -> Draft202012Validator:
    from jsonschema import Draft202012Validator

    schema = load_schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=format_checker())


def _values_at(obj: object, parts: list[str], prefix: tuple[str | int, ...]) -> list[tuple[str, object]]:
    """The (path, value) pairs an x-uniqueBy path (``a[].b``) selects; mismatching shapes select nothing."""
    if not parts:
        return [(join_path(prefix), obj)]
    head, rest = parts[0], parts[1:]
    many = head.endswith("[]")
    key = head[:-2] if many else head
    if not isinstance(obj, dict) or key not in obj:
        return []
    value = obj[key]
    if not many:
        return _values_at(value, rest, (*prefix, key))
    if not isinstance(value, list):
        return []
    out: list[tuple[str, object]] = []
    for index, item in enumerate(value):
        out.extend(_values_at(item, rest, (*prefix, key, index)))
    return out


def unique_by_problem(obj: object, paths: list[str]) -> str | None:
    """``path: repeats VALUE`` for the first value that repeats at one of ``paths``, else None."""
    for spec in paths:
        seen: set[str] = set()
        for path, value in _values_at(obj, spec.split("."), ()):
            key = json.dumps(value, sort_keys=True)
            if key in seen:
                return f"{path}: repeats {short(value)}"
            seen.add(key)
    return None


def schema_verdict(obj: object) -> str | None:
    """None when ``obj`` passes the JSON Schema (with ``date-time`` checked) and x-uniqueBy; else why not."""
    bad = unicode_problem(obj)
    if bad is not None:
        return f"{bad}: not valid Unicode (a lone surrogate)"
    from jsonschema.exceptions import best_match  # type: ignore[import-untyped]

    error = best_match(_validator().iter_errors(obj))
    if error is not None:
        return f"{join_path(list(error.absolute_path))}: {error.message}"
    paths = load_schema().get("x-uniqueBy", [])
    return unique_by_problem(obj, [p for p in paths if isinstance(p, str)])
