"""What the `permissions` verbs print: terminal-safe lines, JSON, a record's facts, the ``ls`` table (pure)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from bot.prompts.shown import command_line
from bot.util.durations import format_age
from bot.util.words import clip

_JSON_UNSAFE = re.compile(r"[\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def clean(text: object, limit: int | None = None) -> str:
    """One terminal-safe line: whitespace runs become one space, anything unprintable (control, bidi and
    other format characters) becomes '?'; cut with … to ``limit`` characters when one is given."""
    line = str(text)
    if not line.isprintable() or "  " in line or line[:1] == " " or line[-1:] == " ":  # else nothing to do:
        line = " ".join(line.split())  # a printable line's only white space is " "
        if not line.isprintable():  # checked at C speed, rebuilt only when not
            line = "".join(c if c.isprintable() else "?" for c in line)
    return line if limit is None else clip(line, limit)


def dumps(obj: object, indent: int | None = None) -> str:
    """JSON with readable non-ASCII, but C1 controls, bidi marks and line separators escaped."""
    seps = (",", ": ") if indent else (",", ":")
    text = json.dumps(obj, ensure_ascii=False, indent=indent, separators=seps)
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _str(rec: Mapping[str, Any], *keys: str) -> str:
    for k in keys:
        v = rec.get(k)
        if isinstance(v, str) and v:
            return v
    return ""


def tool_of(rec: Mapping[str, Any]) -> str:
    """The record's real tool name (the harness's), else its ACP kind; never its title (the model writes that,
    and agentproto's ``toolName`` falls back to it, so it counts only where ``tool_name`` is not given)."""
    name = rec.get("tool_name") if "tool_name" in rec else rec.get("toolName")
    return name if isinstance(name, str) and name else _str(rec, "tool_kind") or "?"


def session_of(rec: Mapping[str, Any]) -> str:
    """The session's label when it has one, else its id."""
    return _str(rec, "label", "session_id", "sessionId") or "?"


def matches_session(rec: Mapping[str, Any], session: str) -> bool:
    """Whether ``session`` is the record's session id or label."""
    return session in (rec.get("session_id"), rec.get("sessionId"), rec.get("label"))


def preview(raw: object) -> str:
    """What the tool would do, in brief: the command line the prompt shows (``args`` too), else the
    path/url/pattern, else compact JSON."""
    if raw is None or raw == {}:
        return ""
    if isinstance(raw, str):
        return raw
    command = command_line(raw)  # shown_input(raw).command, without building the rest
    if command is not None:
        return command
    if isinstance(raw, Mapping):
        if found := _str(raw, "cmd", "file_path", "path", "abs_path", "notebook_path", "url", "pattern", "query"):
            return found
    try:
        return json.dumps(raw, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return str(raw)


def question(rec: Mapping[str, Any]) -> str:
    """What would run first (the command line, else a path or the input), then the title: a long title
    never pushes the command out of the column. ``Allow "TOOL"?`` when there is neither. A question is
    marked ``[question]`` (its text), a plan ``[plan]`` (its title)."""
    kind = rec.get("kind")
    if kind in ("question", "plan"):
        return f"[{kind}] {_str(rec, 'title')}"
    what = preview(rec.get("raw_input", rec.get("rawInput")))
    title = _str(rec, "title")
    if not what:
        return title or f'Allow "{tool_of(rec)}"?'
    return f"{what} — {title}" if title and title != what else what


def age_of(rec: Mapping[str, Any], now: datetime) -> str:
    """How long the request has waited (``12s``, ``3m``), ``?`` when unknown."""
    try:
        t = datetime.fromisoformat(rec.get("requested_at", rec.get("requestedAt")))  # TypeError: not a str
    except (TypeError, ValueError):
        return "?"
    return format_age((now - (t if t.tzinfo else t.replace(tzinfo=UTC))).total_seconds())


_HEAD = ("ID", "SESSION", "TOOL", "AGE", "QUESTION")
_CAPS = (None, 24, 24, 6)  # the id is never cut: it is what approve and deny take


def table(
    records: Sequence[Mapping[str, Any]], width: int, now: datetime, widths: Sequence[int] | None = None
) -> tuple[list[str], list[int]]:
    """The ``ls`` table: one line per record, cells cut with … to fit ``width`` columns (the id whole), and the
    column widths. ``widths``: those of an earlier page, to go on with (no header then); else sized to these."""
    rows = [
        (clean(str(r.get("id", "?"))), clean(session_of(r)), clean(tool_of(r)), age_of(r, now), clean(question(r)))
        for r in records
    ]
    head = widths is None
    if widths is None:
        widths = [max(len(_HEAD[i]), *(len(row[i]) for row in rows)) for i in range(len(_CAPS))]
        widths = [w if cap is None else min(cap, w) for w, cap in zip(widths, _CAPS, strict=True)]
    last = max(len(_HEAD[4]), width - sum(widths) - 2 * len(widths))
    w0, w1, w2, w3 = widths
    lines = [
        f"{a.ljust(w0)}  {clip(b, w1).ljust(w1)}  {clip(c, w2).ljust(w2)}  {clip(d, w3).ljust(w3)}  {clip(q, last)}"
        .rstrip()
        for a, b, c, d, q in ([_HEAD, *rows] if head else rows)
    ]
    return lines, list(widths)


def outcome_text(outcome: Mapping[str, Any]) -> str:
    """A settled record's outcome in brief: ``OPTION by WHO via VIA`` (``cancelled`` without an option)."""
    bits = [str(outcome.get("option_id") or "cancelled")]
    for k, fmt in (("answered_by", "by {}"), ("via", "via {}")):
        v = outcome.get(k)
        if isinstance(v, str) and v:
            bits.append(fmt.format(v))
    return clean(" ".join(bits))


def summary(verb: str, rid: str, rec: Mapping[str, Any]) -> str:
    """The line ``approve``/``deny`` prints: what was chosen (option id and name), or that it was cancelled."""
    done = "approved" if verb == "approve" else "denied"
    outcome = rec.get("outcome")
    oid = outcome.get("option_id") if isinstance(outcome, Mapping) else None
    if not oid:
        if rec.get("state") == "cancelled":
            return f"{done} {rid}: cancelled (no reject-flavoured option offered)"
        return f"{done} {rid}"
    name = outcome.get("option_name") if isinstance(outcome, Mapping) else None
    if not name:
        for o in rec.get("options") or []:
            if isinstance(o, Mapping) and o.get("optionId") == oid:
                name = o.get("name")
    return f"{done} {rid} with {oid}" + (f" ({name})" if isinstance(name, str) and name else "")
