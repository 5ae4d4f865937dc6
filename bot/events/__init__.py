"""Wire formats and the words they share: the ``dev.agentpod.permission.v2`` content, its subject, the v1
card, the structured answer (pydantic v2). Pure.

``validate_content`` is the one gate (used by ``check-event`` and the prompt builder); the packaged JSON Schema
(bot/schemas/dev.agentpod.permission.v2.json, draft 2020-12 + x-uniqueBy) says the same (tests/support/schema.py
checks by it).

Parts: ``models`` (the pydantic models), ``validate`` (``validate_content``, answers from content),
``timestamps`` (strict RFC 3339, ``iso_ms`` for the wire),
``states`` (the ``State`` and ``Via`` StrEnums: the words a state or a settlement path may be, shared by
record, store, prompts, answers and API; ``VIA_WORDS``: a via as people read it), ``ledger`` (the ledger's
chain), ``checkpoints`` (its checkpoints read back from a room: the state event, the older notice, a
redacted one as a gap naming the seqs it covered).

Also: ``_util`` (small helpers shared by the model check and the tests' schema check), ``kinds`` (what a request asks).
"""

from bot.events.models import (
    ANSWER_KEY,
    CARD_KEY,
    SUBJECT_SCHEMA,
    SUITE_EVENT_TYPE,
    Card,
    PermissionOption,
    PermissionV2,
    Subject,
)
from bot.events.timestamps import format_utc_ms, is_rfc3339, parse_rfc3339
from bot.events.validate import EventError, answer_from_content, validate_answer, validate_content

__all__ = [
    "ANSWER_KEY",
    "CARD_KEY",
    "SUBJECT_SCHEMA",
    "SUITE_EVENT_TYPE",
    "Card",
    "EventError",
    "PermissionOption",
    "PermissionV2",
    "Subject",
    "answer_from_content",
    "format_utc_ms",
    "is_rfc3339",
    "parse_rfc3339",
    "validate_answer",
    "validate_content",
]
