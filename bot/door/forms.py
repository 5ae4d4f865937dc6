"""An ACP ``elicitation/create`` as questions for the room, and the room's answers as its result. Pure.

Form mode: each property of the restricted JSON Schema (ACP's ``ElicitationSchema``) is one question, in the
form's order (``property_order`` when the agent gives one, else the schema's):

- single choice: ``type: string`` with ``oneOf`` of ``{const, title, description?}`` or ``enum``;
- multiple choice: ``type: array`` with ``items.anyOf`` (same shape) or ``items.enum``;
- free text: ``type: string``. A ``<name>_custom`` string beside a choice question ``<name>`` (Claude's ACP
  adapter's "Other" field) is no question of its own: the choice question takes the person's own words,
  which go there (and a choice's feedback, ``1 - keep it small``, goes there as a note);
- number / integer: free text, read as a number (:func:`number_of`; the proxy asks again when it is not);
- boolean: the choices Yes and No.

Each question is submitted as a daemon request of the kind ``question`` (:mod:`bot.events.kinds`): its
``rawInput`` carries the question (the property's ``description``, else its ``title``), its header (the
``title`` when both are given), whether several choices or free text are taken, and where it stands in the
form (``form: {index, count}``); its options are the choices (``optionId`` = the value the agent gets) and one
``reject_once`` option, decline. URL mode is one question: the agent's message, with the link in ``rawInput.url``
(the daemon shows it and its host on lines of its own), ``1`` done; a link whose host a browser could read
otherwise than shown is refused (:func:`bot.util.linkhost.link_host`, the daemon's reading too).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from bot.events.kinds import question_params
from bot.util.linkhost import refusal

AskKind = Literal["single", "multi", "text", "number", "integer", "boolean", "url"]
MAX_QUESTIONS = 20
CUSTOM_SUFFIX = "_custom"


class BadForm(ValueError):
    """A form the proxy cannot ask in the room: the message says why."""


@dataclass(frozen=True)
class Choice:
    value: str  # what the agent gets (the option id)
    label: str
    description: str = ""


@dataclass(frozen=True)
class Ask:
    """One question of a form."""

    key: str  # the property's name (the content's key)
    kind: AskKind
    text: str  # the question
    header: str = ""
    choices: tuple[Choice, ...] = ()
    custom: str | None = None  # the paired "Other" property: the person's own words go there
    minimum: float | None = None  # a number's bounds; a multiple choice's minItems / maxItems
    maximum: float | None = None
    url: str | None = None

    @property
    def free_text(self) -> bool:
        return self.kind in ("text", "number", "integer") or self.custom is not None


@dataclass(frozen=True)
class Form:
    asks: tuple[Ask, ...]


def _s(v: Any) -> str:
    return v.strip() if isinstance(v, str) else ""


def _choices(items: Any, enum: Any) -> tuple[Choice, ...]:
    if isinstance(items, list):
        out = [
            Choice(str(o["const"]), _s(o.get("title")) or str(o["const"]), _s(o.get("description")))
            for o in items
            if isinstance(o, Mapping) and isinstance(o.get("const"), str)
        ]
    elif isinstance(enum, list):
        out = [Choice(v, v) for v in enum if isinstance(v, str)]
    else:
        return ()
    unique: dict[str, Choice] = {}
    for c in out:
        unique.setdefault(c.value, c)
    return tuple(unique.values())


def _count(v: Any) -> float | None:
    return float(v) if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _ask(key: str, prop: Mapping[str, Any]) -> Ask | None:
    title, desc = _s(prop.get("title")), _s(prop.get("description"))
    text = desc or title or key
    header = title if desc else ""
    t = prop.get("type")
    num = {k: float(prop[k]) for k in ("minimum", "maximum") if isinstance(prop.get(k), (int, float))}
    if t == "string":
        choices = _choices(prop.get("oneOf"), prop.get("enum"))
        if choices:
            return Ask(key, "single", text, header, choices)
        if prop.get("oneOf") is not None or prop.get("enum") is not None:
            return None  # choices that name nothing
        return Ask(key, "text", text, header)
    if t == "array":
        items = prop.get("items")
        items = items if isinstance(items, Mapping) else {}
        choices = _choices(items.get("anyOf"), items.get("enum"))
        lo, hi = (_count(prop.get(k)) for k in ("minItems", "maxItems"))
        return Ask(key, "multi", text, header, choices, minimum=lo, maximum=hi) if choices else None
    if t in ("number", "integer"):
        return Ask(key, t, text, header, minimum=num.get("minimum"), maximum=num.get("maximum"))
    if t == "boolean":
        return Ask(key, "boolean", text, header, (Choice("yes", "Yes"), Choice("no", "No")))
    return None


def form_of(schema: Any) -> Form:
    """The questions of a form-mode ``requestedSchema``; :class:`BadForm` when it cannot be asked."""
    if not isinstance(schema, Mapping) or not isinstance(schema.get("properties"), Mapping):
        raise BadForm("requestedSchema.properties: expected an object")
    props: Mapping[str, Any] = schema["properties"]
    order = schema.get("property_order")
    names = [n for n in order if isinstance(n, str) and n in props] if isinstance(order, list) else []
    names += [n for n in props if n not in names]
    required = set(schema.get("required") or []) if isinstance(schema.get("required"), list) else set()
    asks: dict[str, Ask] = {}
    for name in names:
        prop = props[name]
        ask = _ask(name, prop) if isinstance(prop, Mapping) else None
        if ask is not None:
            asks[name] = ask
        elif name in required:  # an optional one is left out
            raise BadForm(f"requestedSchema.properties.{name}: a kind of field the room cannot ask")
    for name, ask in list(asks.items()):  # "<q>_custom" beside a choice question <q>: its own words
        base = name[: -len(CUSTOM_SUFFIX)] if name.endswith(CUSTOM_SUFFIX) else None
        paired = asks.get(base) if base else None
        if ask.kind == "text" and paired is not None and paired.kind in ("single", "multi") and paired.custom is None:
            asks[paired.key] = replace(paired, custom=name)
            del asks[name]
    if not asks:
        raise BadForm("requestedSchema: no question the room can ask")
    if len(asks) > MAX_QUESTIONS:
        raise BadForm(f"requestedSchema: at most {MAX_QUESTIONS} questions")
    return Form(tuple(asks.values()))


def url_form(message: str, url: str) -> Form:
    """A URL-mode elicitation as one question: the agent's message and the link; ``1`` done, or decline.
    Only an ``https``/``http`` link whose host every common reading agrees on is posted (:class:`BadForm`
    otherwise, saying why)."""
    if (why := refusal(url)) is not None:
        raise BadForm(f"url: {why}")
    said = message.strip() or "Open the link."
    done = Choice("done", "Done", "I opened the link and finished there")
    return Form((Ask("url", "url", said, "Open a link", (done,), url=url),))


def question_body(
    ask: Ask, *, session_id: str, tool_call_id: str, index: int, count: int, note: str = ""
) -> dict[str, Any]:
    """The daemon submission (ACP params, kind ``question``) for one question; ``note`` heads a re-ask."""
    text = f"{note}\n{ask.text}" if note else ask.text
    raw: dict[str, Any] = {
        "question": text,
        "header": ask.header[:200],
        "multiSelect": ask.kind == "multi",
        "freeText": ask.free_text,
        "options": [{"label": c.label, **({"description": c.description} if c.description else {})}
                    for c in ask.choices],
        "form": {"index": index, "count": count},
        **({"url": ask.url} if ask.url else {}),
    }
    return question_params(session_id, tool_call_id, raw, [(c.value, c.label) for c in ask.choices])


def number_of(ask: Ask, text: str) -> float | int | str:
    """The number the person gave for a number/integer question, or why it is not one (a str)."""
    s = text.strip().replace("_", "")
    try:
        v = float(s)
    except ValueError:
        return f"{text.strip()[:40]!r} is not a number"
    if not math.isfinite(v):
        return f"{text.strip()[:40]!r} is not a number"
    if ask.kind == "integer":
        if not v.is_integer():
            return f"{text.strip()[:40]!r} is not a whole number"
        out: float | int = int(v)
    else:
        out = int(v) if v.is_integer() and "." not in s and "e" not in s.lower() else v
    if ask.minimum is not None and v < ask.minimum:
        return f"{out} is below the minimum {ask.minimum:g}"
    if ask.maximum is not None and v > ask.maximum:
        return f"{out} is above the maximum {ask.maximum:g}"
    return out


@dataclass(frozen=True)
class Answered:
    """A question's settled record, as the form needs it."""

    option_id: str | None  # None: cancelled or expired
    chosen: Sequence[str]  # the option ids picked
    text: str | None  # the answer as given (labels joined, or the person's words)
    feedback: str | None = None


def answered(rec: Mapping[str, Any]) -> Answered:
    """What a settled record of a question says (an expired one is no answer: the form is cancelled)."""
    out = rec.get("outcome")
    if rec.get("state") != "resolved" or not isinstance(out, Mapping) or not isinstance(out.get("option_id"), str):
        return Answered(None, (), None)
    answers = out.get("answers")
    text = next(iter(answers.values()), None) if isinstance(answers, Mapping) and answers else None
    chosen = [c for c in out.get("chosen") or [] if isinstance(c, str)]
    fb = out.get("feedback")
    return Answered(out["option_id"], chosen, text if isinstance(text, str) else None,
                    fb if isinstance(fb, str) and fb else None)


def value_of(ask: Ask, a: Answered) -> dict[str, Any] | str:
    """The content entries one answered question gives (a dict), or why its answer does not fit (a str)."""
    picked = list(a.chosen) or ([a.option_id] if a.option_id in {c.value for c in ask.choices} else [])
    own = a.text if not picked else None  # the person's own words
    out: dict[str, Any] = {}
    if ask.kind in ("single", "multi"):
        if picked and ask.kind == "multi":
            if ask.minimum is not None and len(picked) < ask.minimum:
                return f"choose at least {ask.minimum:g}"
            if ask.maximum is not None and len(picked) > ask.maximum:
                return f"choose at most {ask.maximum:g}"
        if picked:
            out[ask.key] = picked if ask.kind == "multi" else picked[0]
        note = own if own is not None else a.feedback
        if note is not None and ask.custom is not None:
            out[ask.custom] = note
        return out if out else "no choice given"
    if ask.kind == "boolean":
        return {ask.key: picked[0] == "yes"} if picked else "answer yes or no"
    if ask.kind == "url":
        return {}
    if ask.kind in ("number", "integer"):
        v = number_of(ask, a.text or "")
        return v if isinstance(v, str) else {ask.key: v}
    return {ask.key: a.text or ""}
