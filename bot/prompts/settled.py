"""After the decision: the settled prompt (outcome banner + ``resolution``) and its ``m.replace`` edit. Pure."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from bot.events import CARD_KEY, format_utc_ms, validate_content
from bot.events.states import VIA_WORDS, State, Via
from bot.prompts.asks import PLAN_HINT, QUESTION_HINT, QUESTION_HINT_CLOSED
from bot.prompts.build import HTML_FORMAT
from bot.prompts.message import ANSWER_HINT, HINT_START
from bot.prompts.text import cut, esc, one_line, prose, valid, visible

MAX_FEEDBACK = 2000
MAX_FEEDBACK_SHOWN = 300


def _outcome_line(
    prompt: Mapping[str, Any],
    *,
    state: str,
    option_id: str | None,
    label: str | None,
    answered_by: str,
    via: str,
    feedback: str | None,
    answer: str | None = None,
) -> str:
    """One line saying what was decided, by whom and how (the option label is agent text: shown as prose;
    ``answer``: a question's answer as given)."""
    meaning = next(
        (o.get("meaning") for o in prompt.get("options", []) if isinstance(o, Mapping) and o.get("id") == option_id),
        None,
    )
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


def _strip_suffix(text: str, suffix: str) -> str:
    return text[: -len(suffix)].rstrip("\n") if suffix and text.endswith(suffix) else text


def _strip_hint(text: str) -> str:
    """The body without its last paragraph when that is the answer hint (``Reply with the number ...``)."""
    head, sep, last = text.rpartition("\n\n")
    return head if sep and last.startswith(HINT_START) else text


def _strip_hint_html(html: str) -> str:
    at = html.rfind(f"<p>{HINT_START}")
    return html[:at] if at >= 0 and html.endswith("</p>") else html


def _strip_options(text: str) -> str:
    """The body without its numbered options (the last paragraph, ``1. Allow once`` ...): settled, they are
    no longer choices, and the outcome line names the one taken."""
    head, sep, last = text.rpartition("\n\n")
    lines = last.split("\n")
    numbered = all(line.startswith(f"{n}. ") for n, line in enumerate(lines, 1))
    return head if sep and numbered else text


def _strip_options_html(html: str) -> str:
    at = html.rfind("<ol>")
    return html[:at] if at >= 0 and html.endswith("</ol>") else html


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
    answer: str | None = None,
) -> dict[str, Any]:
    """The ``m.new_content`` of the edit that settles ``prompt``: the v2 content plus ``resolution``.

    ``state`` is ``resolved``, ``expired`` or ``cancelled``; ``option_name`` defaults to the option's label;
    ``answer`` is a question's answer as given (the resolution's ``answer``).
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
        answer=answer,
    )
    body, old_html = str(settled.get("body", "")), settled.get("formatted_body")
    for hint in (ANSWER_HINT, QUESTION_HINT, QUESTION_HINT_CLOSED, PLAN_HINT):  # a question's or a plan's
        body = _strip_suffix(body, hint)
        old_html = _strip_suffix(old_html, f"<p>{esc(hint)}</p>") if isinstance(old_html, str) else old_html
    body = _strip_options(_strip_hint(body))
    old_html = _strip_options_html(_strip_hint_html(old_html)) if isinstance(old_html, str) else esc(body)
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
    edit: dict[str, Any] = {"msgtype": new_content.get("msgtype", "m.text"), "body": "* " + line}
    edit["m.new_content"] = new_content
    edit["m.relates_to"] = {"rel_type": "m.replace", "event_id": prompt_event_id}
    edit["m.mentions"] = {}
    return edit
