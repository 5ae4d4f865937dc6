"""Will an event fit the homeserver's 64 KiB limit? Sizes of a prompt and its worst-case settled edit.

Synapse refuses a PDU over 65,536 bytes (``M_TOO_LARGE``, HTTP 413); the PDU is the content plus an
envelope (ids, hashes, signatures, prev/auth events) that ``ENVELOPE`` reserves. In an encrypted
room the content travels as Megolm ciphertext: base64 of the JSON plaintext plus its MAC and
signature, beside the clear ``m.relates_to`` and the session's ids. Pure: no I/O.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

from bot.events.states import State, Via
from bot.inbox.record import RESOLVED, Outcome, Record
from bot.inbox.submission import Submission, SubmissionError

MAX_EVENT = 65_536
ENVELOPE = 2_048  # room and event ids, sender, hashes, signatures, prev/auth events, timestamps
MEGOLM_OVERHEAD = 128  # version, message index, MAC and ed25519 signature inside the ciphertext
MEGOLM_FIELDS = 512  # algorithm, sender_key, device_id, session_id next to the ciphertext
MAX_USER_ID = 255  # the spec's limit: the longest ``answered_by`` a settled edit can name
WORST_SEQ = 10**9  # a request number as long as any the inbox will hand out
WORST_FEEDBACK = "x" * 2000  # bot.prompts.MAX_FEEDBACK


def _json_len(v: Any, *, ascii_only: bool = False) -> int:
    return len(json.dumps(v, ensure_ascii=ascii_only, separators=(",", ":")).encode())


def event_size(content: dict[str, Any], *, encrypted: bool, event_type: str = "m.room.message") -> int:
    """Bytes of the event that carries ``content``, envelope included (ciphertext in an encrypted room)."""
    if not encrypted:
        return _json_len(content) + ENVELOPE
    plain = _json_len({"type": event_type, "content": content, "room_id": "!" + "x" * 255}, ascii_only=True)
    ciphertext = 4 * math.ceil((plain + MEGOLM_OVERHEAD) / 3)
    clear = _json_len(content.get("m.relates_to", {}))
    return ciphertext + clear + MEGOLM_FIELDS + ENVELOPE


def fits(content: dict[str, Any], *, encrypted: bool) -> bool:
    return event_size(content, encrypted=encrypted) <= MAX_EVENT


def provisional(sub: Submission, now: float, timeout: float) -> Record:
    """The record ``sub`` would become, with the longest number and revision it could get."""
    return Record(
        id=f"{sub.session_id}:{WORST_SEQ}", session_id=sub.session_id, request_seq=WORST_SEQ, key=sub.key,
        label=sub.label, tool_call_id=sub.tool_call_id, title=sub.title, tool_kind=sub.tool_kind,
        tool_name=sub.tool_name, options=sub.options, raw_input=sub.raw_input, locations=sub.locations,
        content=sub.content, params=sub.params, digest=sub.digest, revision=WORST_SEQ, state=State.PENDING,
        requested_at=now, expires_at=now + timeout, prompt_event_id=None, prompt_edited=False, outcome=None,
        cwd=sub.cwd, kind=sub.kind,
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
    from bot.room.posts import prompt_content, settled_content  # the exact contents the outbox sends

    rec = provisional(sub, now, timeout)
    where = " in an encrypted room" if encrypted else ""
    try:
        contents = (("prompt", prompt_content(rec)), ("settled edit", settled_content(worst_settled(rec))))
    except ValueError as e:  # no valid event can say this (the builder names the field)
        raise SubmissionError(str(e)) from None
    for what, content in contents:
        size = event_size(content, encrypted=encrypted)
        if size > MAX_EVENT:
            raise TooLarge(
                f"the {what} would take {size} bytes{where}, more than the homeserver's {MAX_EVENT}-byte "
                "event limit even after shortening; send fewer or shorter options, title or input"
            )
