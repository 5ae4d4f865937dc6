"""A permission request -> the prompt's Matrix content. Pure: no I/O, no clock.

The prompt is one ``m.room.message`` whose content is a valid ``dev.agentpod.permission.v2`` object with the
v1 card beside it (docs/wire.md). Options are numbered by meaning
(:func:`bot.prompts.options.by_meaning`, the one place that order is decided); the v2 ``options`` and the
v1 card list them in that order with the agent's ids. Everything built here passes ``validate_content``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from bot.events import CARD_KEY, SUBJECT_SCHEMA, SUITE_EVENT_TYPE, format_utc_ms, validate_content
from bot.events.kinds import Kind, question_of
from bot.events.ledger import option_meaning
from bot.prompts import asks, meanings, message
from bot.prompts.options import shown_order
from bot.prompts.preview import MAX_LABEL, STEPS, Limits, build_preview, gather
from bot.prompts.text import cut, prose, valid

HTML_FORMAT = "org.matrix.custom.html"
MAX_OPTION_ID = 200
MAX_OPTIONS = 20
# UTF-8 bytes of the prompt content. Matrix events are capped at 64 KiB, and the settled edit carries
# the content twice (fallback + m.new_content), so the prompt keeps well under half of that.
CONTENT_BUDGET = 24_000


def _identity(name: str, value: object, *, limit: int | None = None) -> str:
    """An identifier that must travel unchanged: a non-empty string of valid Unicode, else ``ValueError``."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name}: must be a non-empty string (got {value!r:.60})")
    if valid(value) != value:
        raise ValueError(f"{name}: not valid Unicode")
    if limit is not None and len(value) > limit:
        raise ValueError(f"{name}: at most {limit} characters (got {len(value)})")
    return value


def shown_options(options: Sequence[Mapping[str, Any]], kind: str | None = None) -> list[tuple[str, str, str]]:
    """(optionId, name, kind) of each ACP option in the shown order (``kind``: the request's,
    bot.events.kinds); ``ValueError`` when no valid event could carry them (errors name the agent's index)."""
    if not 1 <= len(options) <= MAX_OPTIONS:
        raise ValueError(f"options: 1 to {MAX_OPTIONS} options needed (got {len(options)})")
    seen: set[str] = set()
    for index, option in enumerate(options):
        if not isinstance(option, Mapping):
            raise ValueError(f"options[{index}]: must be an object")
        option_id = _identity(f"options[{index}].optionId", option.get("optionId"), limit=MAX_OPTION_ID)
        if option_id in seen:
            raise ValueError(f"options[{index}].optionId: repeats {option_id!r}")
        seen.add(option_id)
    out: list[tuple[str, str, str]] = []
    for option in shown_order(options, kind):
        name, kind = option.get("name"), option.get("kind")
        out.append((option["optionId"], name if isinstance(name, str) else "", kind if isinstance(kind, str) else ""))
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
    cwd: str | None = None,
    session_line: str | None = None,
    kind: str = Kind.PERMISSION,
) -> dict[str, Any]:
    """The prompt's ``m.room.message`` content: prose, HTML, the v2 fields and the v1 card.

    ``options`` are ACP options (``optionId``, ``name``, ``kind``) in the agent's order; ``locations`` ACP
    ToolCallLocations; ``content`` ACP ToolCallContent; ``tool_name`` the harness's own tool name (never
    the title); ``label`` and ``cwd`` say which agent asks, and where; ``session_line`` is the bot's own
    "Allow for this session" line, numbered after the options in the body and HTML only (the v2
    ``options`` stay the agent's). ``expires_at`` naive means UTC.
    Raises ``ValueError`` when no valid event can say this (empty ids, no options or more than 20, repeated
    or over-long option ids). ``kind`` (bot.events.kinds): a question or a plan is shown as one
    (:mod:`bot.prompts.asks`).
    """
    _identity("request_id", request_id)
    _identity("session_id", session_id)
    if not isinstance(digest, str) or valid(digest) != digest:
        raise ValueError("digest: must be a string of valid Unicode")
    if isinstance(revision, bool) or not isinstance(revision, int):
        raise ValueError(f"revision: must be an int (got {revision!r:.60})")
    facts: dict[str, Any] = {
        "acp": shown_options(options, kind),
        "title": valid(title) if isinstance(title, str) else "",
        "kind": cut(valid(tool_kind), MAX_LABEL)[0] if isinstance(tool_kind, str) and tool_kind else None,
        "tool": valid(tool_name) if isinstance(tool_name, str) and tool_name else "",
        "agent": valid(label) if isinstance(label, str) and label.strip() else "",
        "cwd": valid(cwd) if isinstance(cwd, str) and cwd.strip() else "",
        "session_line": session_line or "",
    }
    facts["notes"] = meanings.notes(facts["acp"], tool_name=facts["tool"], plan=kind == Kind.PLAN)
    locations = locations if isinstance(locations, list) else []
    content = content if isinstance(content, list) else []
    facts["read"] = gather(
        raw_input=raw_input, tool_kind=facts["kind"], title=facts["title"], locations=locations, content=content
    )
    if kind == Kind.PLAN:  # what else the plan request carries: shown beside the plan, never hidden by it
        rest_input, rest = asks.plan_rest(raw_input, content)
        facts["rest"] = gather(raw_input=rest_input, tool_kind=None, title="", locations=locations, content=rest)
    ids = {"request_id": request_id, "session_id": session_id, "request_seq": request_seq}
    subject = {"id": request_id, "digest": digest, "schema": SUBJECT_SCHEMA, "revision": revision,
               "expires_at": format_utc_ms(expires_at)}
    asking = kind in (Kind.QUESTION, Kind.PLAN)
    result: dict[str, Any] = {}
    for step in range(len(asks.PLAN_STEPS) if asking else len(STEPS)):
        if asking:
            result = _ask_at(facts, ids, subject, kind, raw_input, step)
        else:
            result = _prompt_at(facts, ids, subject, STEPS[step])
        if len(json.dumps(result, ensure_ascii=False).encode()) <= CONTENT_BUDGET:
            break
    validate_content(result)
    return result


def _ask_at(
    facts: Mapping[str, Any], ids: Mapping[str, Any], subject: Mapping[str, Any], kind: str, raw_input: Any,
    step: int,
) -> dict[str, Any]:
    """A question's or a plan's prompt content at cut step ``step`` (0: nothing cut)."""
    v2_options = _v2_options(facts["acp"], MAX_LABEL)
    if kind == Kind.QUESTION:
        form = raw_input.get("form") if isinstance(raw_input, dict) else None
        at = (form.get("index"), form.get("count")) if isinstance(form, dict) else (None, None)
        shown = asks.question(
            question_of(raw_input), [(o["id"], o["label"]) for o in v2_options], agent=facts["agent"],
            cwd=facts["cwd"], form=(at[0], at[1]) if isinstance(at[0], int) and isinstance(at[1], int) else None,
            short=step > 0,
        )
    else:
        rest = build_preview(agent="", tool="", tool_kind=None, facts=facts["rest"],
                             limits=STEPS[min(step, len(STEPS) - 1)])
        shown = asks.plan(facts["title"], raw_input, _labels(v2_options, facts["notes"]), agent=facts["agent"],
                          cwd=facts["cwd"], limit=asks.PLAN_STEPS[step], rest=rest)
    return _envelope(ids, subject, facts, cut(shown.title, 1000)[0], v2_options, shown.body, shown.html,
                     shown.items, shown.complete)


def _prompt_at(
    facts: Mapping[str, Any], ids: Mapping[str, Any], subject: Mapping[str, Any], limits: Limits
) -> dict[str, Any]:
    """The prompt content with the given cuts."""
    v2_title, _ = cut(facts["title"], limits.title)
    v2_options = _v2_options(facts["acp"], limits.label)
    shown = _labels(v2_options, facts["notes"])
    if facts["session_line"]:
        shown.append(facts["session_line"])
    preview = build_preview(agent=facts["agent"], cwd=facts["cwd"], tool=facts["tool"], tool_kind=facts["kind"],
                            facts=facts["read"], limits=limits)
    display = prose(v2_title) or prose(facts["tool"], limits.title) or "tool call"
    kinds = [kind for _, _, kind in facts["acp"]]  # who denies: the first reject_once, else reject_always
    deny = next((kinds.index(k) + 1 for k in ("reject_once", "reject_always") if k in kinds), None)
    body, html = message.render(display, preview, shown, deny)
    return _envelope(ids, subject, facts, v2_title, v2_options, body, html, preview.items, preview.complete)


def _v2_options(acp: Sequence[tuple[str, str, str]], label_limit: int) -> list[dict[str, Any]]:
    """The v2 ``options`` of the shown (optionId, name, kind) triples, labels cut at ``label_limit``."""
    v2_options: list[dict[str, Any]] = []
    for option_id, name, acp_kind in acp:
        meaning, scope = option_meaning(acp_kind)
        option: dict[str, Any] = {"id": option_id, "label": cut(valid(name), label_limit)[0], "meaning": meaning}
        if scope is not None:
            option["scope"] = scope
        v2_options.append(option)
    return v2_options


def _labels(v2_options: Sequence[Mapping[str, Any]], notes: Mapping[str, str]) -> list[str]:
    """How the prompt names each option in its numbered list (its label, else its id, else ``option N``), with
    the bot's note where the option does other than its words say (:mod:`bot.prompts.meanings`)."""
    return [meanings.noted(prose(o["label"]) or prose(o["id"]) or f"option {n}", notes.get(o["id"]))
            for n, o in enumerate(v2_options, 1)]


def _envelope(
    ids: Mapping[str, Any], subject: Mapping[str, Any], facts: Mapping[str, Any], v2_title: str,
    v2_options: list[dict[str, Any]], body: str, html: str, items: list[dict[str, str]], complete: bool,
) -> dict[str, Any]:
    """The v2 content around a prompt's prose: ids, title, options, subject and the v1 card."""
    prompt: dict[str, Any] = {
        "msgtype": "m.text",
        "body": body,
        "format": HTML_FORMAT,
        "formatted_body": html,
        "m.mentions": {},
        "suite_event_type": SUITE_EVENT_TYPE,
        "schema_version": 1,
        **ids,
        "title": v2_title,
    }
    if facts["kind"]:
        prompt["tool_kind"] = facts["kind"]
    prompt["options"] = v2_options
    prompt["subject"] = {**subject, "preview": items, "preview_complete": complete}
    prompt[CARD_KEY] = {
        "schema_version": 1,
        "session_id": ids["session_id"],
        "request_seq": ids["request_seq"],
        "title": v2_title,
        "options": [{"option_id": o["id"], "name": o["label"]} for o in v2_options],
    }
    return prompt
