"""After the decision: the settled prompt (outcome banner + ``resolution``) and its ``m.replace`` edit. Pure."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from bot.events import CARD_KEY, format_utc_ms, validate_content
from bot.events.states import VIA_WORDS, State, Via
from bot.prompts.build import HTML_FORMAT
from bot.prompts.message import HINT_START
from bot.prompts.text import cut, esc, one_line, prose, valid, visible

MAX_FEEDBACK = 2000
MAX_FEEDBACK_SHOWN = 300


def _outcome_line(
    meaning: object, *, state: str, option_id: str | None, label: str | None, answered_by: str, via: str,
    feedback: str | None, answer: str | None,
) -> str:
    """One line saying what was decided, by whom and how (``meaning``: the chosen option's; the option label is
    agent text: shown as prose; ``answer``: a question's answer as given)."""
    named = f" ({prose(label)})" if label else ""
    chosen = {"approve": "Approved", "reject": "Rejected"}.get(str(meaning), "Chose")
    if state == State.RESOLVED and answer is not None:
        line = f"☑️ Answered: {prose(answer, MAX_FEEDBACK_SHOWN)}"
    elif state == State.RESOLVED:
        icon = {"approve": "✅", "reject": "❌"}.get(str(meaning), "☑️")
        line = f"{icon} {chosen}{named}"
    elif state == State.EXPIRED:
        line = "⏱ Expired, no answer in time" + (f": {chosen.lower()}{named}" if option_id else ": cancelled")
    elif state == State.CANCELLED:
        line = "🚫 Cancelled"
    else:
        line = f"{one_line(state)}{named}"
    if answered_by and answered_by not in {via, Via.TIMEOUT, Via.CANCEL}:
        line += f" by {one_line(answered_by)}"
    if via not in {Via.TIMEOUT, Via.CANCEL, ""}:
        line += f" via {VIA_WORDS.get(via) or one_line(via)}"
    if feedback and feedback.strip():
        shown, _ = cut(one_line(visible(one_line(feedback)[: MAX_FEEDBACK_SHOWN + 1])), MAX_FEEDBACK_SHOWN)
        line += f": “{shown}”"  # a person's words (or the bot's): mentions kept, m.mentions stops pings
    return valid(line)


def _unasked(body: str, html: object) -> tuple[str, str]:
    """The body and HTML without the answer hint (the last paragraph, ``Reply with ...``) and the numbered
    options before it (``1. Allow once`` ...): settled, they are no longer choices, and the outcome line names
    the one taken. No HTML: the body's, escaped."""
    head, sep, last = body.rpartition("\n\n")
    if sep and last.startswith(HINT_START):
        body = head
    head, sep, last = body.rpartition("\n\n")
    if sep and all(line.startswith(f"{n}. ") for n, line in enumerate(last.split("\n"), 1)):
        body = head
    if not isinstance(html, str):
        return body, esc(body)
    at = html.rfind(f"<p>{HINT_START}")
    html = html[:at] if at >= 0 and html.endswith("</p>") else html
    at = html.rfind("<ol>")
    return body, html[:at] if at >= 0 and html.endswith("</ol>") else html


def build_settled(
    prompt: dict[str, Any], *, state: str, option_id: str | None, option_name: str | None, answered_by: str,
    via: str, feedback: str | None, decided_at: datetime, answer: str | None = None,
) -> dict[str, Any]:
    """The ``m.new_content`` of the edit that settles ``prompt``: the v2 content plus ``resolution``.

    ``state`` is ``resolved``, ``expired`` or ``cancelled``; ``option_name`` defaults to the option's label;
    ``answer`` is a question's answer as given (the resolution's ``answer``).
    The body starts with a one-line outcome, then a blank line, then the prompt's body without the hint.
    """
    settled = copy.deepcopy(prompt)
    for key in ("m.relates_to", "m.new_content"):
        settled.pop(key, None)
    chosen = next((o for o in settled.get("options", []) if isinstance(o, Mapping) and o.get("id") == option_id), {})
    label = chosen.get("label") if option_name is None and option_id is not None else option_name
    line = _outcome_line(chosen.get("meaning"), state=state, option_id=option_id, label=label,
                         answered_by=answered_by, via=via, feedback=feedback, answer=answer)
    body, old_html = _unasked(str(settled.get("body", "")), settled.get("formatted_body"))
    settled.pop(CARD_KEY, None)  # the v1 card asks; the settled v2 content (with its resolution) answers
    settled["body"] = f"{line}\n\n{body}" if body else line
    settled["format"] = HTML_FORMAT
    settled["formatted_body"] = f"<p><strong>{esc(line)}</strong></p>{old_html}"
    settled["m.mentions"] = {}
    settled["resolution"] = {
        "state": state,
        "option_id": option_id,
        "option_label": valid(label) if isinstance(label, str) else None,
        "answered_by": valid(answered_by),
        "via": via,
        "feedback": cut(valid(feedback), MAX_FEEDBACK)[0] if isinstance(feedback, str) else None,
        "decided_at": format_utc_ms(decided_at),
    }
    if answer is not None:
        settled["resolution"]["answer"] = cut(valid(answer), MAX_FEEDBACK)[0]
    validate_content(settled)
    return settled


def edit_content(prompt_event_id: str, new_content: dict[str, Any]) -> dict[str, Any]:
    """An ``m.replace`` edit of ``prompt_event_id`` to ``new_content``. Its fallback (what a client without
    edits shows) is the outcome line alone, prefixed ``* ``: the whole settled message is in
    ``m.new_content``, and repeating it would double what every member downloads."""
    line = str(new_content.get("body", "")).split("\n", 1)[0]
    return {"msgtype": new_content.get("msgtype", "m.text"), "body": "* " + line, "m.new_content": new_content,
            "m.relates_to": {"rel_type": "m.replace", "event_id": prompt_event_id}, "m.mentions": {}}
