"""A submitted permission request (ACP ``session/request_permission`` params + extras) -> validated facts.

The body is kept as sent; ``key``, ``label``, ``cwd`` (the session's working directory, as the
proxy learnt it from ``session/new``) and ``toolCallContext`` are ours and stay out of the digest,
which covers exactly the params the agent sent. A key names one body: :func:`conflict` says whether
a submission is the body a stored request was made from (the inbox's insert asks it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any

import rfc8785

from bot.events._util import unicode_problem
from bot.events.kinds import Kind, check_question_options, question_of, request_kind
from bot.inbox.record import Record
from bot.util.digest import EXTRAS, digest_params
from bot.util.ids import SAFE_ID_RULE, is_safe_id

MAX_OPTIONS = 20


class SubmissionError(ValueError):
    """A submission the inbox refuses: the message names the field."""


class KeyConflict(Exception):
    """A used ``key`` sent with another body: answered 409, never with the stored record."""


SHOWN = ("digest", "label", "cwd", "title", "tool_kind", "tool_name", "options", "raw_input", "locations", "content")
"""What a key binds besides the session: the params (their digest) and every extra that changes what
a prompt shows (``label``, ``cwd``, and what ``toolCallContext`` filled in)."""


@dataclass(frozen=True)
class Submission:
    """What the inbox needs to know about one request, before it has a number."""

    session_id: str
    tool_call_id: str
    key: str | None
    label: str | None
    cwd: str | None
    title: str
    tool_kind: str | None
    tool_name: str | None
    options: list[dict[str, Any]]
    raw_input: Any
    locations: list[dict[str, Any]]
    content: list[dict[str, Any]]
    params: dict[str, Any]
    digest: str
    kind: Kind = Kind.PERMISSION  # bot.events.kinds: a permission, a question or a plan

    def as_fields(self) -> dict[str, Any]:
        """Its fields by name: the record's fields (and ``requests`` columns) of the same names."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _str(v: Any, field: str, *, required: bool = True, max_len: int | None = None) -> str | None:
    if v is None and not required:
        return None
    if not isinstance(v, str):
        raise SubmissionError(f"{field}: expected a string")
    if required and not v.strip():
        raise SubmissionError(f"{field}: must not be empty")
    if max_len is not None and len(v) > max_len:
        raise SubmissionError(f"{field}: at most {max_len} characters")
    return v


def _safe(v: Any, field: str, *, required: bool = True) -> str | None:
    """A session id, key or label: the safe charset only (it ends up in URLs, ids and prompts)."""
    s = _str(v, field, required=required)
    if s is not None and not is_safe_id(s):
        raise SubmissionError(f"{field}: must be {SAFE_ID_RULE}")
    return s


def _tool_name(tool_call: dict[str, Any]) -> str | None:
    meta = tool_call.get("_meta")
    if isinstance(meta, dict):
        for v in meta.values():
            if isinstance(v, dict) and isinstance(v.get("toolName"), str) and v["toolName"]:
                return str(v["toolName"])
        if isinstance(meta.get("toolName"), str) and meta["toolName"]:
            return str(meta["toolName"])
    return None


def _list_of_dicts(v: Any) -> list[dict[str, Any]]:
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []


def parse_submission(body: Any) -> Submission:
    """Validate a submitted body; raise SubmissionError naming the field."""
    if not isinstance(body, dict):
        raise SubmissionError("body: expected a JSON object")
    if (where := unicode_problem(body)) is not None:  # JSON allows "\ud800"; UTF-8 (the store) does not
        raise SubmissionError(f"{where}: not valid Unicode (a lone surrogate)")
    session_id = _safe(body.get("sessionId"), "sessionId")
    key = _safe(body.get("key"), "key", required=False)
    label = _safe(body.get("label"), "label", required=False)
    cwd = _str(body.get("cwd"), "cwd", required=False, max_len=4096)
    tc = body.get("toolCall")
    if not isinstance(tc, dict):
        raise SubmissionError("toolCall: expected an object with toolCallId")
    tool_call_id = _str(tc.get("toolCallId"), "toolCall.toolCallId", max_len=255)
    ctx = body.get("toolCallContext")
    if ctx is not None and not isinstance(ctx, dict):
        raise SubmissionError("toolCallContext: expected an object")
    ctx = ctx or {}

    opts = body.get("options")
    if not isinstance(opts, list) or not opts:
        raise SubmissionError("options: at least 1 option is needed")
    if len(opts) > MAX_OPTIONS:
        raise SubmissionError(f"options: at most {MAX_OPTIONS} options")
    options: list[dict[str, Any]] = []
    for i, o in enumerate(opts):
        if not isinstance(o, dict):
            raise SubmissionError(f"options[{i}]: expected an object")
        oid = _str(o.get("optionId"), f"options[{i}].optionId", max_len=200)
        name = _str(o.get("name"), f"options[{i}].name", required=True, max_len=200)
        kind = _str(o.get("kind"), f"options[{i}].kind", required=True, max_len=64)
        if any(x["optionId"] == oid for x in options):
            raise SubmissionError(f"options[{i}].optionId: repeats {oid!r}")
        options.append({"optionId": oid, "name": name, "kind": kind})

    def pick(field: str) -> Any:
        v = tc.get(field)
        return v if v not in (None, "", [], {}) else ctx.get(field)

    title = pick("title")
    title = title.strip() if isinstance(title, str) and title.strip() else None
    kind = pick("kind")
    kind = kind if isinstance(kind, str) and kind else None
    tool_name = _tool_name(tc) or (_tool_name(ctx) if ctx else None)
    raw_input = pick("rawInput")
    what = request_kind(kind, pick("_meta"), raw_input)
    if what == Kind.QUESTION:
        try:
            question_of(raw_input)
            check_question_options(options)
        except ValueError as e:
            raise SubmissionError(str(e)) from None
    params = {k: v for k, v in body.items() if k not in EXTRAS}
    try:
        digest = digest_params(params)
    except (rfc8785.CanonicalizationError, ValueError, TypeError, RecursionError) as e:
        raise SubmissionError(f"body: cannot be canonicalized (RFC 8785): {e}") from None
    if len(json.dumps(params)) > 1_000_000:
        raise SubmissionError("body: larger than 1 MB")
    return Submission(
        session_id=str(session_id),
        tool_call_id=str(tool_call_id),
        key=key,
        label=label,
        cwd=cwd,
        title=title or f"Tool call {tool_call_id}",
        tool_kind=kind,
        tool_name=tool_name,
        options=options,
        raw_input=raw_input,
        locations=_list_of_dicts(pick("locations")),
        content=_list_of_dicts(pick("content")),
        params=params,
        digest=digest,
        kind=what,
    )


def canon(v: Any) -> str:
    """Canonical JSON (keys sorted, compact, non-ASCII as is): compared as a string, exactly."""
    return json.dumps(v, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def conflict(sub: Submission, rec: Record) -> str | None:
    """Why ``sub`` is not the body ``rec`` was stored from (naming what differs), or None when it is."""
    for field in SHOWN:
        if canon(getattr(sub, field)) != canon(getattr(rec, field)):
            what = "the params" if field == "digest" else field
            return f"key: already used for another body ({what} differs)"
    return None
