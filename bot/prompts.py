"""A permission request -> Matrix content: the prompt, the settled edit, the digest. Pure: no I/O, no clock.

The prompt is one ``m.room.message`` whose content is a valid ``dev.agentpod.permission.v2`` object with the
v1 card beside it (CONTRACT.md, "Matrix wire"). Everything built here passes ``validate_content``.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import html
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import rfc8785

from bot.events import CARD_KEY, SUBJECT_SCHEMA, SUITE_EVENT_TYPE, format_utc_ms, validate_content

__all__ = [
    "ANSWER_HINT",
    "build_prompt",
    "build_settled",
    "digest_params",
    "edit_content",
    "option_meaning",
]

ANSWER_HINT = "Reply with the number, or the option's name."
HTML_FORMAT = "org.matrix.custom.html"
MAX_COMMAND = 2000
MAX_DIFF = 4000
MAX_ITEMS = 5
MAX_LABEL = 200
MAX_OPTION_ID = 200
MAX_OPTIONS = 20
MAX_FEEDBACK = 2000
MAX_FEEDBACK_SHOWN = 300
# UTF-8 bytes of the prompt content. Matrix events are capped at 64 KiB, and the settled edit carries
# the content twice (fallback + m.new_content), so the prompt keeps well under half of that.
CONTENT_BUDGET = 24_000

_MEANINGS: dict[str, tuple[str, str | None]] = {
    "allow_once": ("approve", "once"),
    "allow_always": ("approve", "always"),
    "reject_once": ("reject", "once"),
    "reject_always": ("reject", "always"),
}
_SURROGATE = re.compile("[\ud800-\udfff]")
_VIA_WORDS = {"matrix": "reply", "reaction": "reaction", "structured": "app", "api": "API", "rule": "rule"}


def digest_params(params: dict[str, Any]) -> str:
    """Lowercase hex SHA-256 of the RFC 8785 canonical JSON of ``params``.

    Raises ``ValueError`` (rfc8785's ``CanonicalizationError``) for values JCS cannot hold: NaN, infinities,
    integers beyond 2**53.
    """
    return hashlib.sha256(rfc8785.dumps(params)).hexdigest()


def option_meaning(kind: str) -> tuple[str, str | None]:
    """ACP option kind -> (meaning, scope): ``allow_once`` -> ("approve", "once"), else ("choose", None)."""
    return _MEANINGS.get(kind, ("choose", None)) if isinstance(kind, str) else ("choose", None)


# --- small text helpers ---------------------------------------------------------------------------------


def _clean(text: str) -> str:
    """Text safe to send: surrogate pairs joined, lone surrogates replaced by U+FFFD."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _cut(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to at most ``limit`` characters (ending in "…" when cut), and whether it was cut."""
    if len(text) <= limit:
        return text, False
    return text[: max(limit - 1, 0)] + "…", True


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _esc(text: str) -> str:
    return html.escape(text, quote=False)


# --- the preview ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Limits:
    title: int
    label: int
    command: int
    diff: int
    items: int


_STEPS = (
    _Limits(title=1000, label=MAX_LABEL, command=MAX_COMMAND, diff=MAX_DIFF, items=MAX_ITEMS),
    _Limits(title=1000, label=MAX_LABEL, command=1000, diff=2000, items=MAX_ITEMS),
    _Limits(title=500, label=MAX_LABEL, command=500, diff=800, items=3),
    _Limits(title=200, label=100, command=200, diff=300, items=2),
    _Limits(title=100, label=40, command=100, diff=100, items=1),
)


def _command_text(raw_input: object) -> tuple[str, str] | None:
    """(label, text) for the raw input: its command (lists shell-joined), else compact JSON."""
    if raw_input is None or raw_input == {} or raw_input == [] or raw_input == "":
        return None
    if isinstance(raw_input, Mapping):
        command = raw_input.get("command")
        args = raw_input.get("args")
        extra = _shell_join(args) if isinstance(args, list) and args else ""
        if isinstance(command, str) and command:
            return "Command", f"{command} {extra}".rstrip() if extra else command
        if isinstance(command, list) and command:
            return "Command", f"{_shell_join(command)} {extra}".rstrip()
    if isinstance(raw_input, str):
        return "Input", raw_input
    try:
        text = json.dumps(raw_input, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):  # circular or otherwise unprintable: say what it is
        text = repr(raw_input)
    return "Input", text


def _shell_join(parts: list[Any]) -> str:
    return shlex.join(p if isinstance(p, str) else json.dumps(p, default=str) for p in parts)


def _diff_text(item: Mapping[str, Any]) -> tuple[str, str] | None:
    """(path, unified diff) of an ACP ``diff`` content block, or None when it is not one."""
    path, old, new = item.get("path"), item.get("oldText"), item.get("newText")
    if not isinstance(path, str) or not isinstance(new, str) or not (old is None or isinstance(old, str)):
        return None
    lines = difflib.unified_diff(
        old.splitlines() if old else [],
        new.splitlines(),
        fromfile=path if old is not None else "/dev/null",
        tofile=path,
        lineterm="",
    )
    return path, "\n".join(lines) or "(no changes)"


def _content_text(item: Mapping[str, Any]) -> str | None:
    """The text of an ACP ``content`` block holding text, or None."""
    inner = item.get("content")
    if isinstance(inner, Mapping) and inner.get("type") == "text" and isinstance(inner.get("text"), str):
        text: str = inner["text"]
        return text or None
    return None


def _location_text(loc: object) -> str | None:
    if not isinstance(loc, Mapping) or not isinstance(loc.get("path"), str) or not loc["path"]:
        return None
    line = loc.get("line")
    path: str = loc["path"]
    return f"{path}:{line}" if isinstance(line, int) and not isinstance(line, bool) else path


def _preview(
    *,
    agent: str,
    tool: str,
    tool_kind: str | None,
    raw_input: object,
    locations: Sequence[object],
    content: Sequence[object],
    limits: _Limits,
) -> tuple[list[dict[str, str]], bool]:
    """The preview items and whether they are complete (nothing cut or dropped)."""
    items: list[dict[str, str]] = []
    complete = True

    def shorten(text: str, limit: int) -> str:
        nonlocal complete
        short, was_cut = _cut(_clean(text), limit)
        complete = complete and not was_cut
        return short

    def text_item(label: str, text: str, limit: int) -> None:
        items.append({"type": "text", "label": shorten(label, limits.label), "text": shorten(text, limit)})

    if agent:
        items.append({"type": "field", "label": "Agent", "value": shorten(agent, limits.title)})
    if tool:
        items.append({"type": "field", "label": "Tool", "value": shorten(tool, limits.title)})
    if tool_kind:
        items.append({"type": "field", "label": "Kind", "value": shorten(tool_kind, limits.label)})
    command = _command_text(raw_input)
    if command is not None:
        text_item(command[0], command[1], limits.command)
    blocks = [b for b in content if isinstance(b, Mapping)]
    diffs = [d for d in (_diff_text(b) for b in blocks if b.get("type") == "diff") if d is not None]
    texts = [t for t in (_content_text(b) for b in blocks if b.get("type") == "content") if t is not None]
    for path, diff in diffs[: limits.items]:
        text_item(f"Diff: {path}", diff, limits.diff)
    for text in texts[: limits.items]:
        text_item("Details", text, limits.command)
    places = [p for p in (_location_text(loc) for loc in locations) if p is not None]
    for place in places[: limits.items]:
        items.append({"type": "field", "label": "Location", "value": shorten(place, limits.title)})
    if len(diffs) > limits.items or len(texts) > limits.items or len(places) > limits.items:
        complete = False
    return items, complete


# --- prose ---------------------------------------------------------------------------------------------


def _body(title: str, labels: Sequence[str], *, hint: bool) -> str:
    lines = [f"Permission needed: {title}", ""]
    lines += [f"{n}. {label}" for n, label in enumerate(labels, 1)]
    if hint:
        lines += ["", ANSWER_HINT]
    return "\n".join(lines)


def _hint_html() -> str:
    return f"<p>{_esc(ANSWER_HINT)}</p>"


def _formatted(title: str, labels: Sequence[str], preview: Sequence[Mapping[str, Any]], complete: bool) -> str:
    parts = [f"<p><strong>Permission needed:</strong> {_esc(title)}</p>"]
    fields = []
    for item in preview:
        if item.get("type") == "field":
            value = _esc(str(item.get("value", "")))
            if item.get("label") == "Location":
                value = f"<code>{value}</code>"
            fields.append(f"<b>{_esc(str(item.get('label', '')))}:</b> {value}")
    if fields:
        parts.append("<p>" + "<br>".join(fields) + "</p>")
    for item in preview:
        if item.get("type") == "text":
            label = str(item.get("label", ""))
            lang = ' class="language-diff"' if label.startswith("Diff") else ""
            parts.append(f"<p><b>{_esc(label)}</b></p><pre><code{lang}>{_esc(str(item.get('text', '')))}</code></pre>")
    if not complete:
        parts.append("<p><em>Preview shortened.</em></p>")
    parts.append("<ol>" + "".join(f"<li>{_esc(label)}</li>" for label in labels) + "</ol>")
    parts.append(_hint_html())
    return "".join(parts)


# --- the prompt ----------------------------------------------------------------------------------------


def _identity(name: str, value: object, *, limit: int | None = None) -> str:
    """An identifier that must travel unchanged: a non-empty string of valid Unicode, else ``ValueError``."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name}: must be a non-empty string (got {value!r:.60})")
    if _SURROGATE.search(value):
        raise ValueError(f"{name}: not valid Unicode")
    if limit is not None and len(value) > limit:
        raise ValueError(f"{name}: at most {limit} characters (got {len(value)})")
    return value


def _acp_options(options: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, str]]:
    """(optionId, name, kind) of each ACP option; ``ValueError`` when no valid event could carry them."""
    if not 1 <= len(options) <= MAX_OPTIONS:
        raise ValueError(f"options: 1 to {MAX_OPTIONS} options needed (got {len(options)})")
    out: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for index, option in enumerate(options):
        if not isinstance(option, Mapping):
            raise ValueError(f"options[{index}]: must be an object")
        option_id = _identity(f"options[{index}].optionId", option.get("optionId"), limit=MAX_OPTION_ID)
        if option_id in seen:
            raise ValueError(f"options[{index}].optionId: repeats {option_id!r}")
        seen.add(option_id)
        name, kind = option.get("name"), option.get("kind")
        out.append((option_id, name if isinstance(name, str) else "", kind if isinstance(kind, str) else ""))
    return out


def build_prompt(
    *,
    request_id: str,
    session_id: str,
    request_seq: int,
    title: str,
    tool_kind: str | None,
    options: list[dict[str, Any]],
    raw_input: Any,
    locations: list[dict[str, Any]],
    content: list[dict[str, Any]],
    digest: str,
    revision: int,
    expires_at: datetime,
    tool_name: str | None = None,
    label: str | None = None,
) -> dict[str, Any]:
    """The prompt's ``m.room.message`` content: prose, HTML, the v2 fields and the v1 card.

    ``options`` are ACP options (``optionId``, ``name``, ``kind``); ``locations`` ACP ToolCallLocations;
    ``content`` ACP ToolCallContent. ``expires_at`` naive means UTC. Raises ``ValueError`` when no valid
    event can say this (empty ids, no options or more than 20, repeated or over-long option ids).
    """
    _identity("request_id", request_id)
    _identity("session_id", session_id)
    if not isinstance(digest, str) or _SURROGATE.search(digest):
        raise ValueError("digest: must be a string of valid Unicode")
    if isinstance(revision, bool) or not isinstance(revision, int):
        raise ValueError(f"revision: must be an int (got {revision!r:.60})")
    acp = _acp_options(options)
    title = _clean(title) if isinstance(title, str) else ""
    kind = _cut(_clean(tool_kind), MAX_LABEL)[0] if isinstance(tool_kind, str) and tool_kind else None
    tool = _clean(tool_name) if isinstance(tool_name, str) and tool_name else ""
    agent = _clean(label) if isinstance(label, str) and label.strip() else ""
    result: dict[str, Any] = {}
    for limits in _STEPS:
        result = _prompt_at(
            request_id=request_id,
            session_id=session_id,
            request_seq=request_seq,
            title=title,
            kind=kind,
            tool=tool,
            agent=agent,
            acp=acp,
            raw_input=raw_input,
            locations=locations if isinstance(locations, list) else [],
            content=content if isinstance(content, list) else [],
            digest=digest,
            revision=revision,
            expires_at=format_utc_ms(expires_at),
            limits=limits,
        )
        if len(json.dumps(result, ensure_ascii=False).encode()) <= CONTENT_BUDGET:
            break
    validate_content(result)
    return result


def _prompt_at(
    *,
    request_id: str,
    session_id: str,
    request_seq: int,
    title: str,
    kind: str | None,
    tool: str,
    agent: str,
    acp: list[tuple[str, str, str]],
    raw_input: Any,
    locations: list[Any],
    content: list[Any],
    digest: str,
    revision: int,
    expires_at: str,
    limits: _Limits,
) -> dict[str, Any]:
    """The prompt content with the given cuts."""
    v2_title, _ = _cut(title, limits.title)
    v2_options: list[dict[str, Any]] = []
    shown: list[str] = []
    for option_id, name, acp_kind in acp:
        label, _ = _cut(_clean(name), limits.label)
        meaning, scope = option_meaning(acp_kind)
        option: dict[str, Any] = {"id": option_id, "label": label, "meaning": meaning}
        if scope is not None:
            option["scope"] = scope
        v2_options.append(option)
        shown.append(_one_line(label) or _one_line(option_id) or f"option {len(shown) + 1}")
    preview, complete = _preview(
        agent=agent,
        tool=tool or title,
        tool_kind=kind,
        raw_input=raw_input,
        locations=locations,
        content=content,
        limits=limits,
    )
    display = _one_line(v2_title) or _one_line(tool) or "tool call"
    prompt: dict[str, Any] = {
        "msgtype": "m.text",
        "body": _body(display, shown, hint=True),
        "format": HTML_FORMAT,
        "formatted_body": _formatted(display, shown, preview, complete),
        "suite_event_type": SUITE_EVENT_TYPE,
        "schema_version": 1,
        "request_id": request_id,
        "session_id": session_id,
        "request_seq": request_seq,
        "title": v2_title,
    }
    if kind:
        prompt["tool_kind"] = kind
    prompt["options"] = v2_options
    prompt["subject"] = {
        "id": request_id,
        "digest": digest,
        "schema": SUBJECT_SCHEMA,
        "revision": revision,
        "expires_at": expires_at,
        "preview": preview,
        "preview_complete": complete,
    }
    prompt[CARD_KEY] = {
        "schema_version": 1,
        "session_id": session_id,
        "request_seq": request_seq,
        "title": v2_title,
        "options": [{"option_id": o["id"], "name": o["label"]} for o in v2_options],
    }
    return prompt


# --- after the decision --------------------------------------------------------------------------------


def _outcome_line(
    prompt: Mapping[str, Any],
    *,
    state: str,
    option_id: str | None,
    label: str | None,
    answered_by: str,
    via: str,
    feedback: str | None,
) -> str:
    """One line saying what was decided, by whom and how."""
    meaning = next(
        (o.get("meaning") for o in prompt.get("options", []) if isinstance(o, Mapping) and o.get("id") == option_id),
        None,
    )
    named = f" ({_one_line(label)})" if label else ""
    chosen = {"approve": "Approved", "reject": "Rejected"}.get(str(meaning), "Chose")
    if state == "resolved":
        icon = {"approve": "✅", "reject": "❌"}.get(str(meaning), "☑️")
        line = f"{icon} {chosen}{named}"
    elif state == "expired":
        line = "⏱ Expired, no answer in time" + (f": {chosen.lower()}{named}" if option_id else ": cancelled")
    elif state == "cancelled":
        line = "🚫 Cancelled"
    else:
        line = f"{_one_line(state)}{named}"
    if answered_by and answered_by not in {via, "timeout", "cancel"}:
        line += f" by {_one_line(answered_by)}"
    if via not in {"timeout", "cancel", ""}:
        line += f" via {_VIA_WORDS.get(via, _one_line(via))}"
    if feedback and feedback.strip():
        shown, _ = _cut(_one_line(feedback), MAX_FEEDBACK_SHOWN)
        line += f": “{shown}”"
    return _clean(line)


def _strip_suffix(text: str, suffix: str) -> str:
    return text[: -len(suffix)].rstrip("\n") if suffix and text.endswith(suffix) else text


def build_settled(
    prompt: dict[str, Any],
    *,
    state: str,
    option_id: str | None,
    option_name: str | None,
    answered_by: str,
    via: str,
    feedback: str | None,
    decided_at: datetime,
) -> dict[str, Any]:
    """The ``m.new_content`` of the edit that settles ``prompt``: the v2 content plus ``resolution``.

    ``state`` is ``resolved``, ``expired`` or ``cancelled``; ``option_name`` defaults to the option's label.
    The body starts with a one-line outcome, then a blank line, then the prompt's body without the hint.
    """
    settled = copy.deepcopy(prompt)
    for key in ("m.relates_to", "m.new_content"):
        settled.pop(key, None)
    label = option_name
    if label is None and option_id is not None:
        label = next(
            (o.get("label") for o in settled.get("options", []) if isinstance(o, dict) and o.get("id") == option_id),
            None,
        )
    line = _outcome_line(
        settled,
        state=state,
        option_id=option_id,
        label=label,
        answered_by=answered_by,
        via=via,
        feedback=feedback,
    )
    body = _strip_suffix(str(settled.get("body", "")), ANSWER_HINT)
    formatted = settled.get("formatted_body")
    old_html = _strip_suffix(formatted, _hint_html()) if isinstance(formatted, str) else _esc(body)
    settled["body"] = f"{line}\n\n{body}" if body else line
    settled["format"] = HTML_FORMAT
    settled["formatted_body"] = f"<p><strong>{_esc(line)}</strong></p>{old_html}"
    settled["m.mentions"] = {}
    settled["resolution"] = {
        "state": state,
        "option_id": option_id,
        "option_label": _clean(label) if isinstance(label, str) else None,
        "answered_by": _clean(answered_by),
        "via": via,
        "feedback": _cut(_clean(feedback), MAX_FEEDBACK)[0] if isinstance(feedback, str) else None,
        "decided_at": format_utc_ms(decided_at),
    }
    validate_content(settled)
    return settled


def edit_content(prompt_event_id: str, new_content: dict[str, Any]) -> dict[str, Any]:
    """An ``m.replace`` edit of ``prompt_event_id`` to ``new_content`` (fallback body prefixed ``* ``)."""
    edit: dict[str, Any] = {
        "msgtype": new_content.get("msgtype", "m.text"),
        "body": "* " + str(new_content.get("body", "")),
    }
    if isinstance(new_content.get("formatted_body"), str):
        edit["format"] = new_content.get("format", HTML_FORMAT)
        edit["formatted_body"] = "* " + new_content["formatted_body"]
    edit["m.new_content"] = new_content
    edit["m.relates_to"] = {"rel_type": "m.replace", "event_id": prompt_event_id}
    edit["m.mentions"] = {}
    return edit
