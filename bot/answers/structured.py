"""Structured answers (``ANSWER_KEY`` in the content): the payload read (malformed fields kept as a
problem to refuse), then checked against its prompt: the request, still pending, unchanged, the option offered.

One of ``option_id`` (one option), ``option_ids`` (several choices of a multi-select question) or ``text`` (the
person's own words, for a question that takes them: :func:`bot.answers.questions.structured_question`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeGuard

from bot.answers.model import Answer, Candidate, Refusal, Target
from bot.answers.outcomes import answer, not_pending, show, unknown_option
from bot.answers.questions import structured_question
from bot.events.states import Via


def nonempty_str(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and bool(value)


MAX_IDS = 20  # as many as a prompt offers


def classify_structured(
    payload: object, sender: str, event_id: str, addressed: str | None
) -> Candidate | None:
    """A structured answer; JSON ``null`` in an optional field counts as absent."""
    if not isinstance(payload, Mapping):
        return None
    request_id = payload.get("request_id")
    if not isinstance(request_id, str) or not request_id.strip():
        return None
    problems: list[str] = []
    option_id, option_ids, text = payload.get("option_id"), payload.get("option_ids"), payload.get("text")
    given = [k for k, v in (("option_id", option_id), ("option_ids", option_ids), ("text", text)) if v is not None]
    if len(given) > 1:
        problems.append(f"it gives {' and '.join(given)}: give one of option_id, option_ids or text")
    elif option_ids is not None:  # one to MAX_IDS option ids, repeats dropped
        if not isinstance(option_ids, list) or not option_ids or len(option_ids) > MAX_IDS:
            problems.append(f"option_ids is not a list of 1 to {MAX_IDS} option ids")
        elif not all(nonempty_str(v) for v in option_ids):
            problems.append("option_ids holds something that is not an option id")
        else:
            option_ids = tuple(dict.fromkeys(option_ids))
    elif text is not None:
        if not isinstance(text, str) or not text.strip():
            problems.append("text is not text" if not isinstance(text, str) else "text is empty")
        text = text.strip() if isinstance(text, str) else None
    elif not nonempty_str(option_id):
        problems.append("option_id is missing" if option_id in (None, "") else "option_id is not text")
    option_id = option_id if nonempty_str(option_id) else None
    subject = payload.get("subject")
    if subject is not None and not isinstance(subject, Mapping):
        problems.append("subject is not an object")
    fields = subject if isinstance(subject, Mapping) else {}
    digest, revision = fields.get("digest"), fields.get("revision")
    whole = isinstance(revision, int) and not isinstance(revision, bool)
    if digest is not None and not nonempty_str(digest):
        problems.append("subject.digest is not text")
    if revision is not None and not whole:
        problems.append("subject.revision is not a whole number")
    feedback = payload.get("feedback")
    if feedback is not None and not isinstance(feedback, str):
        problems.append("feedback is not text")
        feedback = None
    return Candidate(
        event_id, sender, Via.STRUCTURED, addressed,
        request_id=request_id,
        option_id=option_id,
        option_ids=option_ids if isinstance(option_ids, tuple) else None,
        text=text if isinstance(text, str) else None,
        digest=digest if nonempty_str(digest) else None,
        revision=revision if whole else None,
        feedback=(feedback.strip() or None) if feedback is not None else None,
        explicit=True,
        problem="; ".join(problems) or None,
    )


def resolve_structured(c: Candidate, target: Target | None) -> Answer | Refusal | None:
    rid = c.request_id if isinstance(c.request_id, str) else None
    if target is None and c.prompt_event_id is not None:
        return Refusal(
            "unknown_request",
            f"The structured answer for {show(rid or '', 80)} replies to an event that is not its prompt.",
            rid,
        )
    if target is None:
        if not rid:
            return Refusal("unknown_request", "The structured answer names no request.", None)
        return Refusal("unknown_request", f"No request {show(rid, 80)} is known.", rid)
    if rid != target.request_id:
        return Refusal(
            "unparsable",
            f"The structured answer names request {show(rid or '', 80)} but was sent to the prompt for "
            f"{show(target.request_id, 80)}.",
            target.request_id,
        )
    if not target.pending:
        return not_pending(target)
    if c.problem:
        return Refusal("unparsable", f"The structured answer is malformed: {c.problem}.", rid)
    changed = []
    if c.digest is not None and c.digest != target.digest:
        changed.append("its content")
    if c.revision is not None and c.revision != target.revision:
        changed.append(f"its revision (now {target.revision})")
    if changed:
        return Refusal(
            "stale",
            f"The prompt for {show(rid, 80)} has changed ({' and '.join(changed)}). "
            "Answer the current prompt.",
            rid,
        )
    if c.option_ids is not None or c.text is not None:
        return structured_question(c, target)
    ids = [oid for oid, _ in target.options]
    if not c.option_id:
        return Refusal("unparsable", "The structured answer names no option.", rid)
    if c.option_id not in ids:
        return unknown_option(c.option_id, rid, ids)
    feedback = c.feedback if isinstance(c.feedback, str) and c.feedback.strip() else None
    return answer(c, target, ids.index(c.option_id), feedback)
