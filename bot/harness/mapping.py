"""A watched harness's held request (seed 002's record) -> an inbox submission, and a settled
inbox record -> the decision body sent back. Pure: no I/O, no clock.

The record is kept as received (``params``) and the digest covers exactly it. The inbox session is
``HARNESS:SESSION`` so harnesses and ACP sessions never share numbers; the submission ``key`` is the
harness's id plus a fingerprint of the record's identity, so a harness that restarts and reuses an
id for a new request is not mistaken for the old one.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, replace
from typing import Any

import rfc8785
from pydantic import ValidationError

from bot.hooks.models import HookInput
from bot.hooks.translate import describe
from bot.inbox.record import Record
from bot.inbox.submission import Submission, SubmissionError, parse_submission
from bot.util.digest import digest_params

SAFE = re.compile(r"[A-Za-z0-9._:@-]{1,200}")
_UNSAFE_RUN = re.compile(r"[^A-Za-z0-9._@-]+")
MAX_RECORD = 1_000_000
ELSEWHERE = "answered elsewhere (at the harness)"
CHANGED = "not sent: the harness now holds something other than what was shown"
ASKED_AGAIN = "changed at the harness after it was shown; asked again as revision {revision}"
VOLATILE = ("age",)


class RecordError(ValueError):
    """A held record the bot cannot take: the message names the field."""


@dataclass(frozen=True)
class Held:
    """One held request, ready for the inbox."""

    harness_id: str
    fingerprint: str
    submission: Submission


def _safe(v: Any, field: str) -> str:
    if not isinstance(v, str) or not SAFE.fullmatch(v):
        raise RecordError(f"{field}: expected 1-200 letters, digits or ._:@-")
    return v


def _slug(v: Any, limit: int = 60) -> str:
    """Agent-given text made safe for a label: runs of anything else become ``-``."""
    if not isinstance(v, str):
        return ""
    return _UNSAFE_RUN.sub("-", v).strip("-")[:limit].strip("-")


def fingerprint(record: dict[str, Any]) -> str:
    """What identifies one held request across polls and restarts (the volatile ``age`` left out)."""
    ident = {k: record.get(k) for k in ("id", "sessionId", "toolCallId", "requestedAt")}
    return hashlib.sha256(rfc8785.dumps(ident)).hexdigest()[:16]


def same_request(now_held: dict[str, Any], shown: dict[str, Any]) -> bool:
    """Whether the harness still holds exactly the record that was shown (``age`` aside)."""
    a = {k: v for k, v in now_held.items() if k not in VOLATILE}
    b = {k: v for k, v in shown.items() if k not in VOLATILE}
    return a == b


def label(harness: str, record: dict[str, Any]) -> str:
    """``HARNESS:ADAPTER:TITLE`` from the owning session's adapter and title, each part slugged."""
    parts = [harness, _slug(record.get("adapter"), 40), _slug(record.get("title"))]
    return ":".join(p for p in parts if p)[:200]


def _shown(tool_name: str, raw_input: Any) -> dict[str, Any]:
    """Title, kind, content and locations of a Claude Code tool call, as the hook door shows them
    (``Run: COMMAND``, the Bash description as prose, an edit's diff); nothing when it is no such call."""
    try:
        inp = HookInput.model_validate({"hook_event_name": "PermissionRequest", "session_id": "harness",
                                        "tool_name": tool_name, "tool_input": raw_input})
    except ValidationError:
        return {}
    title, kind, content, locations = describe(inp)
    return {"title": title, "kind": kind, "content": content, "locations": locations}


def to_submission(harness: str, record: Any) -> Held:
    """Validate a held record; RecordError naming the field when it cannot be taken."""
    if not isinstance(record, dict):
        raise RecordError("record: expected a JSON object")
    hid = _safe(record.get("id"), "id")
    session = _safe(record.get("sessionId"), "sessionId")
    tool_call_id = record.get("toolCallId") or hid
    tool_name = record.get("toolName") if isinstance(record.get("toolName"), str) else None
    text = record.get("text") if isinstance(record.get("text"), str) else None
    title = tool_name or text or f"Tool call {hid}"
    tool_call: dict[str, Any] = {"toolCallId": tool_call_id, "title": title, "rawInput": record.get("rawInput")}
    if tool_name:
        tool_call |= _shown(tool_name, record.get("rawInput"))
        tool_call["_meta"] = {"toolName": tool_name}
    acp = {"sessionId": f"{harness}:{session}", "toolCall": tool_call, "options": record.get("options")}
    try:
        sub = parse_submission(acp)
        digest = digest_params(record)
    except SubmissionError as e:
        raise RecordError(str(e).replace("toolCall.toolCallId", "toolCallId").replace("body:", "record:", 1)) from None
    except (ValueError, TypeError, RecursionError) as e:
        raise RecordError(f"record: cannot be canonicalized (RFC 8785): {e}") from None
    if len(json.dumps(record)) > MAX_RECORD:
        raise RecordError("record: larger than 1 MB")
    fp = fingerprint(record)
    sub = replace(sub, key=f"{hid}.{fp}", label=label(harness, record), params=record, digest=digest)
    return Held(harness_id=hid, fingerprint=fp, submission=sub)


def decision_body(rec: Record) -> dict[str, Any]:
    """``POST /permissions/:id`` body for a settled record: the exact ``optionId``, feedback passed on.

    No option (cancelled, or a timeout with no reject option) -> ``deny`` without one, which the
    harness turns into a reject option or a cancellation.
    """
    o = rec.outcome
    assert o is not None, "only settled records are sent back"
    body: dict[str, Any] = {"decision": "deny"}
    if o.option_id is not None:
        kind = next((str(x.get("kind", "")) for x in rec.options if x.get("optionId") == o.option_id), "")
        body = {"decision": "approve" if kind.startswith("allow") else "deny", "optionId": o.option_id}
        if kind == "allow_always":
            body["scope"] = "always"
    if o.feedback:
        body["feedback"] = o.feedback
    return body


def revision_key(key: str | None, old: Record) -> str:
    """The inbox key of a changed record asked again after ``old`` (unique: ``old`` is asked again once)."""
    return f"{key}.after{old.request_seq}"


def changed_note(old: Record, new: Record) -> str:
    """What a prompt whose record changed at the harness says: asked again, and whose answer was not sent."""
    why = ASKED_AGAIN.format(revision=new.revision)
    return why if old.outcome is None else elsewhere_note(old, f"not sent: {why}")


def elsewhere_note(rec: Record, why: str = ELSEWHERE) -> str:
    """The note an undeliverable answer leaves on the record: what happened and whose answer it was."""
    o = rec.outcome
    if o is None:
        return why
    chosen = rec.option_name(o.option_id) if o.option_id else "cancel"
    return f"{why}; {o.answered_by}'s answer ({chosen}) was not delivered"
