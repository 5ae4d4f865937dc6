"""Qwen Code's ``ask_user_question``: a ``session/request_permission`` asked in the room as questions.

Qwen Code's harness marks it in the tool call's ``_meta`` (``qwenInteractionKind: "user_question"``,
``qwenQuestions``: Claude Code's question objects ``{question, header, options: [{label, description}],
multiSelect}``); nothing the model writes makes a request one (:func:`is_user_question`). Its questions go to
the room exactly as an elicitation's do (:class:`bot.acp.elicit.Elicitation`: one prompt per question, the same
answers and guarantees); each takes a choice (several when ``multiSelect``) or the person's own words. The agent
gets what Qwen reads: its ``allow_once`` option with the answers in a top-level ``answers`` field (question index
-> the label, several joined by ``", "``, or the words as given); its reject option when a question is declined
or expires; ``cancelled`` when the turn is cancelled; the ``$/cancel_request`` error when it withdrew the request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.acp import messages
from bot.acp.elicit import ACCEPT, DECLINE, Elicitation
from bot.door import forms, outcomes
from bot.events import kinds
from bot.events.kinds import joined

USER_QUESTION = "user_question"
MAX_VALUE = 200  # the longest option id the daemon takes: a longer label is offered under "choice N"


def is_user_question(params: Any) -> bool:
    """Whether a ``session/request_permission`` is Qwen Code's question, as its harness marks it."""
    tc = params.get("toolCall") if isinstance(params, Mapping) else None
    meta = tc.get("_meta") if isinstance(tc, Mapping) else None
    return isinstance(meta, Mapping) and meta.get("qwenInteractionKind") == USER_QUESTION


def form_of(questions: Any) -> forms.Form:
    """``_meta.qwenQuestions`` as a form: question ``i`` is the ask keyed ``"i"``, its choices valued by
    their labels (what Qwen takes; ``choice N`` for a label no option id can be, read back by
    :func:`answers_of`), the person's own words allowed; :class:`forms.BadForm` naming the field."""
    if not isinstance(questions, list) or not questions:
        raise forms.BadForm("_meta.qwenQuestions: expected a list of questions")
    if len(questions) > forms.MAX_QUESTIONS:
        raise forms.BadForm(f"_meta.qwenQuestions: at most {forms.MAX_QUESTIONS} questions")
    asks: list[forms.Ask] = []
    for i, q in enumerate(questions):
        text = q.get("question") if isinstance(q, Mapping) else None
        if not isinstance(text, str) or not text.strip():
            raise forms.BadForm(f"_meta.qwenQuestions[{i}].question: must be a non-empty string")
        header = q.get("header")
        choices: dict[str, forms.Choice] = {}
        for o in q.get("options") or [] if isinstance(q.get("options"), list) else []:
            label = o.get("label") if isinstance(o, Mapping) else None
            if isinstance(label, str) and label.strip() and label not in choices:
                desc = o.get("description")
                value = label if len(label) <= MAX_VALUE and label != kinds.DECLINE else f"choice {len(choices) + 1}"
                choices[label] = forms.Choice(value, label, desc if isinstance(desc, str) else "")
        kind: forms.AskKind = "multi" if q.get("multiSelect") is True else "single"
        if not choices:
            kind = "text"
        asks.append(forms.Ask(str(i), kind, text.strip(), header.strip() if isinstance(header, str) else "",
                              tuple(choices.values()), custom=f"{i}{forms.CUSTOM_SUFFIX}" if choices else None))
    return forms.Form(tuple(asks))


def answers_of(form: forms.Form, content: Mapping[str, Any]) -> dict[str, str]:
    """The form's content (:func:`forms.value_of`) as Qwen's ``answers``: question index -> the answer."""
    out: dict[str, str] = {}
    for ask in form.asks:
        label = {c.value: c.label for c in ask.choices}
        value = content.get(ask.key)
        own = content.get(ask.custom) if ask.custom else None
        if isinstance(value, list):
            out[ask.key] = joined([label.get(str(v), str(v)) for v in value])
        elif isinstance(value, str) and value:
            out[ask.key] = label.get(value, value)
        elif isinstance(own, str):
            out[ask.key] = own
    return out


class QwenQuestions(Elicitation):
    """One Qwen Code question request: asked in the room as a form, answered as Qwen reads it."""

    allow: str | None = None  # its allow_once option: carries the answers
    reject: str | None = None  # its reject_once option: a declined question

    def read(self, params: dict[str, Any]) -> tuple[str | None, str | None, Any]:
        req = messages.permission_request(params)
        tc = params["toolCall"]
        self.allow = outcomes.option_of(params.get("options"), "allow_once")
        self.reject = outcomes.option_of(params.get("options"), "reject_once")
        if self.allow is None:
            raise forms.BadForm("options: no allow_once option to carry the answers")
        self.form = form_of(tc["_meta"].get("qwenQuestions"))
        return req.session_id, req.tool_call.tool_call_id, None

    def reply(self, reply: dict[str, Any]) -> dict[str, Any]:
        result = reply.get("result")
        what = result.get("action") if isinstance(result, dict) else None
        if what == ACCEPT and self.form is not None and self.allow is not None:
            content = result.get("content") if isinstance(result, dict) else None
            answers = answers_of(self.form, content if isinstance(content, dict) else {})
            return {"result": {**outcomes.selected(self.allow), "answers": answers}}
        if self._cancel.is_set() and self.cancel_by == "agent" and self.cancel_feedback == outcomes.WITHDRAWN:
            return {k: v for k, v in outcomes.withdrawn_error(None).items() if k == "error"}
        if self._cancel.is_set() and self.cancel_by == "client":
            return {"result": outcomes.cancelled()}
        if what == DECLINE or self.reject is not None:  # declined, expired, or the room could not ask it
            return {"result": outcomes.reject_result(self.msg["params"])}
        return {"result": outcomes.cancelled()}
