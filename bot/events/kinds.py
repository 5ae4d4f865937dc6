"""What a request asks: a permission ("may I?"), a question (choices or free text) or a plan to approve. Pure.

A request's ``kind`` is decided from its facts alone, once, when it is submitted (and kept in the record):

- ``question``: the tool call's ``kind`` is ``"question"`` (how the front doors submit a question: one
  request per question, :func:`question_of` reads it from ``rawInput``);
- ``plan``: the harness says the tool is its own plan tool (:func:`plan_tool`: the tool name its ``_meta``
  carries, never anything the model writes) and ``rawInput.plan`` is a non-empty string. A model-written
  ``plan`` field alone, whatever the tool, kind or title, never makes a plan;
- ``permission``: everything else.

A question's ``rawInput`` is ``{"question", "header"?, "multiSelect"?, "freeText"?, "options": [{"label",
"description"?}], "answerType"?}`` (Claude Code's ``AskUserQuestion`` question object, plus ``freeText``:
whether an answer may be the person's own words, absent means yes, as Claude Code takes any text; and
``answerType``: ``number`` or ``integer`` when the words must be one; ``url``: a link to open, an ACP URL-mode
elicitation, whose host the prompt shows by :func:`bot.util.linkhost.link_host`). Its ACP options are the
choices (``optionId`` = the value the agent gets, ``name`` = the label, any kind but the reject ones), in the
agent's order, and one ``reject_once`` option: decline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bot.util.linkhost import refusal

DECLINE = "decline"
"""The option id of a question's last option: the person will not answer (the whole form is declined)."""
ANSWERED = "answer"
"""The ``option_id`` of a question answered with several choices or the person's own words."""
QUESTION_TOOL_KIND = "question"
CHOOSE = "choose"
"""The ACP option kind of a question's choices (neither allow nor reject)."""
PLAN_TOOLS: Mapping[tuple[str | None, str], frozenset[str | None]] = {
    ("claudeCode", "ExitPlanMode"): frozenset({None, "switch_mode"}),  # Claude's ACP adapters (the first: no kind)
    ("claude-code", "ExitPlanMode"): frozenset({"switch_mode"}),  # Claude Code through the hook
    (None, "exit_plan_mode"): frozenset({"switch_mode"}),  # Qwen Code: ``_meta.toolName``
}
"""The plan tools the front doors know, by (the ``_meta`` key the harness names its tools under, or None for
``_meta.toolName`` itself; the tool name), with the ACP kinds each is sent with."""
MAX_QUESTION = 2000


class Kind(StrEnum):
    """What a request asks."""

    PERMISSION = "permission"
    QUESTION = "question"
    PLAN = "plan"


def plan_tool(tool_kind: str | None, meta: Any) -> bool:
    """Whether the harness's ``_meta`` (the tool call's, set by the agent's harness: never by the model) names
    its own plan tool, sent with the ACP kind that tool is sent with."""
    if not isinstance(meta, Mapping):
        return False
    for (vendor, name), kinds in PLAN_TOOLS.items():
        where = meta if vendor is None else meta.get(vendor)
        if isinstance(where, Mapping) and where.get("toolName") == name and tool_kind in kinds:
            return True
    return False


def request_kind(tool_kind: str | None, meta: Any, raw_input: Any) -> Kind:
    """The kind of a request with these facts: the tool call's ACP ``kind``, the harness's ``_meta`` and
    ``rawInput``."""
    if tool_kind == QUESTION_TOOL_KIND:
        return Kind.QUESTION
    plan = raw_input.get("plan") if isinstance(raw_input, Mapping) else None
    if isinstance(plan, str) and plan.strip() and plan_tool(tool_kind, meta):
        return Kind.PLAN
    return Kind.PERMISSION


@dataclass(frozen=True)
class Question:
    """One question as the room shows it and answers read it."""

    text: str
    header: str
    multi: bool
    free_text: bool
    descriptions: Mapping[str, str]  # label -> the choice's description
    answer_type: str = "text"  # free text that must be a "number" or an "integer" (an ACP form's field)
    url: str = ""  # a link to open (URL mode): the prompt shows it and its host on lines of the bot's own


def question_of(raw_input: Any) -> Question:
    """The question a ``question`` request's ``rawInput`` asks; ``ValueError`` naming the field."""
    if not isinstance(raw_input, Mapping):
        raise ValueError("toolCall.rawInput: a question needs an object with a question")
    text = raw_input.get("question")
    if not isinstance(text, str) or not text.strip():
        raise ValueError("toolCall.rawInput.question: must be a non-empty string")
    if len(text) > MAX_QUESTION:
        raise ValueError(f"toolCall.rawInput.question: at most {MAX_QUESTION} characters")
    header = raw_input.get("header", "")
    multi = raw_input.get("multiSelect", False)
    free = raw_input.get("freeText", True)
    if not isinstance(header, str) or len(header) > 200:
        raise ValueError("toolCall.rawInput.header: must be a string of at most 200 characters")
    for key, flag in (("multiSelect", multi), ("freeText", free)):
        if not isinstance(flag, bool):
            raise ValueError(f"toolCall.rawInput.{key}: must be true or false")
    answer_type = raw_input.get("answerType", "text")
    if answer_type not in ("text", "number", "integer"):
        raise ValueError('toolCall.rawInput.answerType: must be "text", "number" or "integer"')
    choices = raw_input.get("options", [])
    described = {c["label"]: c["description"] for c in (choices if isinstance(choices, list) else []) if
                 isinstance(c, Mapping) and isinstance(c.get("label"), str) and isinstance(c.get("description"), str)}
    url = raw_input.get("url")
    if url is not None and (why := refusal(url)) is not None:
        raise ValueError(f"toolCall.rawInput.url: {why}")
    return Question(text=text, header=header, multi=multi, free_text=free, descriptions=described,
                    answer_type=answer_type, url=url or "")


def as_number(text: str, answer_type: str) -> float | int | None:
    """``text`` as the number a ``number`` / ``integer`` question takes, or None when it is not one."""
    try:
        value = float(text.strip())
    except ValueError:
        return None
    if value != value or value in (float("inf"), float("-inf")):
        return None
    if value.is_integer() and abs(value) < 2**53:
        return int(value)
    return None if answer_type == "integer" else value


def check_question_options(options: Sequence[Mapping[str, Any]]) -> None:
    """A question offers its choices and exactly one decline option (``reject_once``), last; ``ValueError``."""
    rejects = [i for i, o in enumerate(options) if str(o.get("kind", "")).startswith("reject")]
    if len(rejects) != 1 or rejects[0] != len(options) - 1:
        raise ValueError("options: a question offers its choices, then exactly one reject_once option (decline)")
    if any(str(o.get("kind", "")).startswith("allow") for o in options):
        raise ValueError("options: a question's choices are not allow options (use the kind \"choose\")")


def joined(labels: Sequence[str]) -> str:
    """Several chosen labels as the agent gets them (Claude Code: ``"Docker, CI"``)."""
    return ", ".join(labels)


def question_params(session_id: str, tool_call_id: str, raw: Mapping[str, Any], choices: Sequence[tuple[str, str]],
                    meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ACP params every front door submits to ask one question: ``raw`` as the tool call's ``rawInput``
    (the shape above), the ``choices`` (option id, label) in order, then decline; the title is the question."""
    options = [{"optionId": value, "name": label, "kind": CHOOSE} for value, label in choices]
    options.append({"optionId": DECLINE, "name": "Decline", "kind": "reject_once"})
    title = " ".join(str(raw["question"]).split())[:300]
    call = {"toolCallId": tool_call_id, "title": title, "kind": QUESTION_TOOL_KIND, "rawInput": dict(raw)}
    return {"sessionId": session_id, "toolCall": call | ({"_meta": dict(meta)} if meta else {}), "options": options}
