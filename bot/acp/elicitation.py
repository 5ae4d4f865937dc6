"""ACP ``elicitation/create`` <-> question requests for the daemon (bot.events.kinds). Pure: no I/O.

A form-mode elicitation's ``requestedSchema`` is a flat object of restricted properties; each becomes one
question, in the schema's order:

- a string with ``oneOf`` (``const``/``title``/``description``) or ``enum``: one choice;
- an ``array`` whose ``items`` have ``anyOf``/``oneOf`` or ``enum``: several choices;
- a ``boolean``: the choices Yes and No;
- a plain string: the person's own words; a ``number`` or ``integer``: words that are one;
- a string property named ``<name>_custom`` beside a choice property ``<name>`` (the Claude ACP adapter's
  "Other" field) is no question of its own: it lets the person answer ``<name>`` in their own words (or adds
  the note given with a choice).

URL mode: one question showing the URL and its host, ``1`` = done (``accept``), or decline.

The answer: every question answered -> ``{"action": "accept", "content": {...}}`` (a choice's ``const``; a
list for several; the words in ``<name>_custom`` when the question has one, else in ``<name>``; a number; a
boolean); one declined -> ``{"action": "decline"}``; cancelled or timed out -> ``{"action": "cancel"}``.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DECLINE = "decline"  # bot.events.kinds.DECLINE: the option id of a question's decline
CUSTOM = "_custom"
MAX_FIELDS = 10


class FormError(ValueError):
    """An elicitation the room cannot ask (the message says why)."""


@dataclass(frozen=True)
class Field:
    """One question of a form."""

    name: str
    kind: str  # single, multi, boolean, text, number, integer, url
    question: str
    header: str
    choices: list[tuple[Any, str, str]] = field(default_factory=list)  # (value, title, description)
    custom: str | None = None  # the "Other" property answering this one in words


def _choices(spec: Mapping[str, Any]) -> list[tuple[Any, str, str]] | None:
    for key in ("oneOf", "anyOf"):
        opts = spec.get(key)
        if isinstance(opts, list) and opts and all(isinstance(o, Mapping) and "const" in o for o in opts):
            return [(o["const"], str(o.get("title") or o["const"]), str(o.get("description") or "")) for o in opts]
    enum = spec.get("enum")
    if isinstance(enum, list) and enum:
        names = spec.get("enumNames")
        titles = names if isinstance(names, list) and len(names) == len(enum) else enum
        return [(v, str(t), "") for v, t in zip(enum, titles, strict=True)]
    return None


def form_fields(params: Mapping[str, Any]) -> list[Field]:
    """The questions of an ``elicitation/create`` request's params; FormError when it cannot be asked."""
    mode = params.get("mode", "form")
    message = params.get("message") if isinstance(params.get("message"), str) else ""
    if mode == "url":
        url = params.get("url")
        if not isinstance(url, str) or not url:
            raise FormError("url: missing")
        host = urllib.parse.urlsplit(url).hostname or "(no host)"
        text = f"{message or 'Open this link and finish there'}: {url} (host: {host})"
        return [Field("url", "url", text, "Link", [(True, "Done", f"finished at {host}")])]
    schema = params.get("requestedSchema")
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(props, Mapping) or not props:
        raise FormError("requestedSchema.properties: no fields to ask")
    fields: list[Field] = []
    for name, spec in props.items():
        if not isinstance(spec, Mapping):
            raise FormError(f"requestedSchema.properties.{name}: not an object")
        base = name[: -len(CUSTOM)] if name.endswith(CUSTOM) else None
        if base is not None and base in props and spec.get("type") == "string":
            continue  # the "Other" field of ``base``
        title = str(spec.get("title") or name)
        question = str(spec.get("description") or spec.get("title") or message or name)
        if len(props) == 1 and message and not spec.get("description"):
            question = message
        kind, choices = _kind(name, spec)
        custom = f"{name}{CUSTOM}" if f"{name}{CUSTOM}" in props and kind in ("single", "multi") else None
        fields.append(Field(name, kind, question, title, choices or [], custom))
    if len(fields) > MAX_FIELDS:
        raise FormError(f"requestedSchema: at most {MAX_FIELDS} questions")
    return fields


def _kind(name: str, spec: Mapping[str, Any]) -> tuple[str, list[tuple[Any, str, str]] | None]:
    t = spec.get("type")
    if t == "array":
        items = spec.get("items")
        choices = _choices(items) if isinstance(items, Mapping) else None
        if not choices:
            raise FormError(f"requestedSchema.properties.{name}: an array needs items with choices")
        return "multi", choices
    if t == "boolean":
        return "boolean", [(True, "Yes", ""), (False, "No", "")]
    if t in ("number", "integer"):
        return str(t), None
    if t == "string":
        choices = _choices(spec)
        return ("single", choices) if choices else ("text", None)
    raise FormError(f"requestedSchema.properties.{name}: type {t!r} cannot be asked")


def submissions(fields: Sequence[Field], *, session_id: str, tool_call_id: str, key: str) -> list[dict[str, Any]]:
    """One question request per field (keys ``KEY.1``, ``KEY.2``...)."""
    out = []
    for i, f in enumerate(fields, 1):
        ids = [_id(v) for v, _, _ in f.choices]
        options = [{"optionId": oid, "name": title[:200], "kind": "choose"}
                   for oid, (_, title, _) in zip(ids, f.choices, strict=True)]
        options.append({"optionId": DECLINE, "name": "Decline", "kind": "reject_once"})
        raw: dict[str, Any] = {
            "question": f.question[:2000],
            "header": f.header[:200],
            "multiSelect": f.kind == "multi",
            "freeText": f.kind in ("text", "number", "integer") or f.custom is not None,
            "options": [{"label": title, "description": desc} for _, title, desc in f.choices],
            "form": {"index": i, "count": len(fields)},
        }
        if f.kind in ("number", "integer"):
            raw["answerType"] = f.kind
        out.append({
            "sessionId": session_id,
            "toolCall": {"toolCallId": f"{tool_call_id}:{f.name}"[:255], "title": f.question[:300],
                         "kind": "question", "rawInput": raw},
            "options": options,
            "key": f"{key}.{i}",
        })
    return out


def _id(value: Any) -> str:
    return value if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)


def result(fields: Sequence[Field], records: Sequence[Mapping[str, Any] | None]) -> dict[str, Any]:
    """The ``elicitation/create`` result for the settled question records (API form, in order; None for a
    question never asked)."""
    content: dict[str, Any] = {}
    for f, rec in zip(fields, records, strict=True):
        out = (rec or {}).get("outcome") or {}
        if rec is None or rec.get("state") != "resolved":
            return {"action": "cancel"}
        if out.get("option_id") == DECLINE:
            return {"action": "decline"}
        answers = out.get("answers")
        if not isinstance(answers, Mapping) or not answers:
            return {"action": "cancel"}
        words = str(next(iter(answers.values())))
        chosen = [c for c in out.get("chosen") or [] if isinstance(c, str)]
        value_of = {_id(v): v for v, _, _ in f.choices}
        picked = [value_of[c] for c in chosen if c in value_of]
        note = out.get("feedback") if isinstance(out.get("feedback"), str) else None
        if f.kind == "url":
            continue
        if f.kind in ("number", "integer"):
            content[f.name] = _number(words, f.kind)
        elif f.kind == "text":
            content[f.name] = words
        elif not picked:  # the person's own words to a question with choices
            content[f.custom or f.name] = words
        else:
            content[f.name] = picked if f.kind == "multi" else picked[0]
            if note and f.custom:
                content[f.custom] = note
    return {"action": "accept", "content": content} if content or fields[0].kind != "url" else {"action": "accept"}


def _number(text: str, kind: str) -> float | int:
    value = float(text.strip())
    return int(value) if kind == "integer" or value.is_integer() else value
