"""``validate_content``: a content object -> a ``PermissionV2``, or one line naming what is wrong."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from bot.events._util import join_path, short, unicode_problem
from bot.events.models import ANSWER_KEY, PermissionAnswer, PermissionV2

M = TypeVar("M", bound=BaseModel)

_TAGS = {"field", "text"}  # discriminator tags pydantic puts into the locations of preview items
_REASONS = {  # pydantic's error type -> the reason; {value}: the input, shortened; other names: the error's ctx
    "missing": "required",
    "string_type": "must be a string (got {value})",
    "int_type": "must be a whole number (got {value})",
    "bool_type": "must be true or false (got {value})",
    "list_type": "must be a list (got {value})",
    "dict_type": "must be an object (got {value})",
    "model_type": "must be an object (got {value})",
    "model_attributes_type": "must be an object (got {value})",
    "greater_than_equal": "at least {ge} (got {value})",
    "rfc3339": "not an RFC 3339 date-time ({value})",
    "not_null": "must not be null",
    "union_tag_not_found": 'needs a "type": "field" or "text"',
    "string_unicode": "not valid Unicode",
}
_LENGTHS = {  # pydantic's length errors: (bound, its ctx key, what is counted)
    "too_short": ("at least", "min_length", "item"),
    "too_long": ("at most", "max_length", "item"),
    "string_too_short": ("at least", "min_length", "character"),
    "string_too_long": ("at most", "max_length", "character"),
}


class EventError(ValueError):
    """A refused event: ``str()`` is one line, ``path: reason``."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def _location(loc: Sequence[str | int]) -> list[str | int]:
    """Drop the union tags pydantic inserts after ``preview[i]``."""
    out: list[str | int] = []
    for part in loc:
        tag = isinstance(part, str) and part in _TAGS and len(out) >= 2 and isinstance(out[-1], int)
        if not (tag and out[-2] == "preview"):
            out.append(part)
    return out


def _reason(err: ErrorDetails) -> tuple[list[str | int], str]:
    """The path and the plain-words reason of one pydantic error."""
    loc = _location(err["loc"])
    kind, ctx, value = err["type"], err.get("ctx") or {}, err.get("input")
    if kind in _REASONS:
        return loc, _REASONS[kind].format_map({**ctx, "value": short(value)})
    if kind == "literal_error":
        expected = str(ctx.get("expected", "")).replace("'", '"')
        return loc, f"must be {expected} (got {short(value)})"
    if kind in _LENGTHS:
        bound, key, unit = _LENGTHS[kind]
        n = ctx.get(key)
        return loc, f"{bound} {n} {unit}" + ("" if n == 1 else "s")
    if kind == "unique_by":
        return [*loc, ctx["index"], ctx["key"]], f"repeats {short(ctx['value'])}"
    if kind == "union_tag_invalid":
        return [*loc, "type"], f'must be "field" or "text" (got {short(ctx.get("tag"))})'
    return loc, err["msg"]


def _validate(model: type[M], obj: object, prefix: Sequence[str | int] = ()) -> M:
    bad = unicode_problem(obj)
    if bad is not None:
        path = bad if not prefix else join_path(prefix) + ("" if bad == "content" else "." + bad)
        raise EventError(path, "not valid Unicode (a lone surrogate)")
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        loc, reason = _reason(exc.errors(include_url=False)[0])
        raise EventError(join_path([*prefix, *loc]), reason) from None


def validate_content(obj: object) -> PermissionV2:
    """Validate a ``dev.agentpod.permission.v2`` content object; ``EventError`` names the first problem."""
    if not isinstance(obj, Mapping):
        raise EventError("content", f"must be a JSON object (got {short(obj)})")
    return _validate(PermissionV2, obj)


def validate_answer(obj: object) -> PermissionAnswer:
    """Validate the object under ``"dev.agentpod.permission.answer"``; paths are prefixed with that key."""
    return _validate(PermissionAnswer, obj, (ANSWER_KEY,))


def answer_from_content(content: Mapping[str, Any]) -> PermissionAnswer | None:
    """The structured answer of a message content: None when it has none, ``EventError`` when malformed."""
    if ANSWER_KEY not in content:
        return None
    return validate_answer(content[ANSWER_KEY])
