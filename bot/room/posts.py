"""What the bot posts for a record: the prompt, and the full text of a shortened prompt; whether the prompt
shows everything (answers need that, so it is remembered per request instead of rebuilt)."""

from __future__ import annotations

import html
import json
from collections import OrderedDict
from dataclasses import replace
from typing import Any

from bot.events.kinds import Kind
from bot.events.states import State, Via
from bot.events.timestamps import to_datetime
from bot.inbox.quorum import progress
from bot.inbox.record import RESOLVED, Outcome, Record
from bot.inbox.session_rules import facts, offered
from bot.inbox.submission import Submission, SubmissionError
from bot.matrix.notices import notice_content
from bot.prompts import build_prompt, build_settled, edit_content
from bot.prompts.asks import plan_parts
from bot.prompts.attachment import full_text_content
from bot.room import event_size


def prompt_content(rec: Record) -> dict[str, Any]:
    """The prompt exactly as posted for ``rec`` (rebuilt: it is a pure function of the record); a quorum
    request's says how many approvals it needs and who gave them (``1 of 2: @alice``)."""
    content = _prompt(rec)
    lines = []
    if rec.quorum:
        lines.append(progress(rec.approvals_needed, rec.approvals))
    if rec.escalated_at is not None:
        lines.append(f"Escalated to {', '.join(rec.escalated_to or [])}: no answer in time")
    content["body"] = "\n".join([*lines, content["body"]])
    heads = "".join(f"<p><b>{html.escape(line)}</b></p>" for line in lines)
    content["formatted_body"] = heads + content["formatted_body"]
    return content


def progress_edit(rec: Record) -> dict[str, Any]:
    """The m.replace edit of a pending quorum prompt showing the approvals so far."""
    assert rec.prompt_event_id
    return edit_content(rec.prompt_event_id, prompt_content(rec))


def _prompt(rec: Record) -> dict[str, Any]:
    return build_prompt(
        request_id=rec.id, session_id=rec.session_id, request_seq=rec.request_seq, title=rec.title,
        tool_kind=rec.tool_kind, options=rec.options, raw_input=rec.raw_input, locations=rec.locations,
        content=rec.content, digest=rec.digest, revision=rec.revision, expires_at=to_datetime(rec.expires_at),
        tool_name=rec.tool_name, label=rec.label, cwd=rec.cwd,
        session_line=offered(facts(rec), [str(o.get("kind")) for o in rec.options]), kind=rec.kind,
    )


_COMPLETE: OrderedDict[tuple[str, str], bool] = OrderedDict()  # (request id, digest) -> preview_complete
_COMPLETE_MAX = 65_536  # a few MB at most; each entry is computed once, when the prompt is posted


def remember_complete(rec: Record, content: dict[str, Any]) -> bool:
    """Note (and return) whether ``content``, the prompt posted for ``rec``, shows everything."""
    complete = bool(content["subject"]["preview_complete"])
    _COMPLETE[(rec.id, rec.digest)] = complete
    while len(_COMPLETE) > _COMPLETE_MAX:
        _COMPLETE.popitem(last=False)
    return complete


def prompt_complete(rec: Record) -> bool:
    """Whether ``rec``'s prompt shows everything (``subject.preview_complete``); remembered per request."""
    key = (rec.id, rec.digest)
    if key in _COMPLETE:
        _COMPLETE.move_to_end(key)
        return _COMPLETE[key]
    try:
        return remember_complete(rec, prompt_content(rec))
    except ValueError:  # no prompt can show it: nothing was shown in full
        return False


def full_text_notices(rec: Record, prompt_event_id: str) -> list[dict[str, Any]]:
    """The m.notices, in the prompt's thread, carrying the full text of ``rec``'s shortened prompt (a plan:
    the whole plan, in as many parts as it needs)."""
    notice = notice_content("", reply_to=None, thread_root=prompt_event_id)
    relation = notice["m.relates_to"]
    if rec.kind == Kind.PLAN:
        return [
            {**notice, "body": body, "format": "org.matrix.custom.html", "formatted_body": formatted}
            for body, formatted in plan_parts(rec.raw_input)
        ]
    content = full_text_content(
        request_id=rec.id, title=rec.title, tool_kind=rec.tool_kind, raw_input=rec.raw_input, content=rec.content
    )
    return [{**content, "m.relates_to": relation}]


def answer_of(rec: Record) -> str | None:
    """A question's answer as given (what its settled prompt shows), or None."""
    o = rec.outcome
    if o is None or not o.answers:
        return None
    return next(iter(o.answers.values()))


def settled_new_content(rec: Record) -> dict[str, Any]:
    """``rec``'s prompt showing its outcome: the edit's ``m.new_content``, or, for a request settled before its
    prompt was posted, the one event posted for it."""
    assert rec.outcome is not None
    o = rec.outcome
    return build_settled(
        prompt_content(rec), state=rec.state, option_id=o.option_id, option_name=rec.option_name(o.option_id),
        answered_by=o.answered_by, via=o.via, feedback=o.feedback, decided_at=to_datetime(o.decided_at),
        answer=answer_of(rec),
    )


def settled_content(rec: Record) -> dict[str, Any]:
    """The m.replace edit that shows ``rec``'s outcome."""
    assert rec.prompt_event_id
    return edit_content(rec.prompt_event_id, settled_new_content(rec))


SHORT_FIELD = 2048  # a short fallback keeps the content's fields up to this size (JSON bytes)


def short_content(full: dict[str, Any], body: str) -> dict[str, Any]:
    """``full`` without its large fields and with ``body``: what is sent when ``full`` is too large."""
    kept = {k: v for k, v in full.items()
            if k not in ("body", "formatted_body", "format") and len(json.dumps(v)) <= SHORT_FIELD}
    kept["body"] = body
    return kept


def short_prompt_content(rec: Record) -> dict[str, Any]:
    """A prompt the homeserver refused as too large, said in a few lines."""
    full = prompt_content(rec)
    names = ", ".join(f"{i}. {o['name'][:60]}" for i, o in enumerate(rec.options, start=1))
    return short_content(
        full, f"Permission request {rec.id}: {rec.title[:200]}\n(too large to show here; "
        f"see GET /permissions/{rec.id})\nAnswer: {names}"[:4000],
    )


def short_settled_new_content(rec: Record) -> dict[str, Any]:
    """``settled_new_content`` the homeserver refused as too large, as its outcome line alone."""
    full = settled_new_content(rec)
    line = str(full.get("body", "")).split("\n", 1)[0]
    return short_content(full, f"{line}\n(the request is too large to repeat here)")


def short_settled_content(rec: Record) -> dict[str, Any]:
    """The settled edit the homeserver refused as too large, as its outcome line alone."""
    assert rec.prompt_event_id
    return edit_content(rec.prompt_event_id, short_settled_new_content(rec))


# Will a submission's prompt, and its worst-case settled edit, fit one event? Measured on the exact contents
# posted, at submit time, so that a request no event can carry is refused (HTTP 422) rather than lost later.
MAX_USER_ID = 255  # the spec's limit: the longest ``answered_by`` a settled edit can name
WORST_SEQ = 10**9  # a request number as long as any the inbox will hand out
WORST_FEEDBACK = "x" * 2000  # bot.prompts.MAX_FEEDBACK


def provisional(sub: Submission, now: float, timeout: float) -> Record:
    """The record ``sub`` would become, with the longest number and revision it could get."""
    return Record(
        **sub.as_fields(), id=f"{sub.session_id}:{WORST_SEQ}", request_seq=WORST_SEQ, revision=WORST_SEQ,
        state=State.PENDING, requested_at=now, expires_at=now + timeout, prompt_event_id=None, prompt_edited=False,
        outcome=None,
    )


def worst_settled(rec: Record, prompt_event_id: str = "$" + "x" * 255) -> Record:
    """``rec`` settled the longest way: the longest option name, user id and feedback."""
    longest = max(rec.options, key=lambda o: len(json.dumps(o)))
    outcome = Outcome(
        option_id=str(longest["optionId"]), answered_by="@" + "x" * (MAX_USER_ID - 1), via=Via.STRUCTURED,
        feedback=WORST_FEEDBACK, decided_at=rec.expires_at,
        answers={"q": WORST_FEEDBACK} if rec.kind == "question" else None,
    )
    return replace(rec, state=RESOLVED, outcome=outcome, prompt_event_id=prompt_event_id)


class TooLarge(SubmissionError):
    """The prompt or its settled edit cannot fit one event, even after the cuts (HTTP 422 ``too_large``)."""


def check_submission(sub: Submission, now: float, timeout: float, *, encrypted: bool) -> None:
    """Raise TooLarge when the prompt or its worst-case settled edit would not fit one event."""
    rec = provisional(sub, now, timeout)
    where = " in an encrypted room" if encrypted else ""
    try:
        contents = (("prompt", prompt_content(rec)), ("settled edit", settled_content(worst_settled(rec))))
    except ValueError as e:  # no valid event can say this (the builder names the field)
        raise SubmissionError(str(e)) from None
    for what, content in contents:
        size = event_size.event_size(content, encrypted=encrypted)
        if size > event_size.MAX_EVENT:
            raise TooLarge(
                f"the {what} would take {size} bytes{where}, more than the homeserver's {event_size.MAX_EVENT}-byte "
                "event limit even after shortening; send fewer or shorter options, title or input"
            )
