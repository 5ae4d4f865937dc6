"""Wire formats and the words they share: the ``dev.agentpod.permission.v2`` content, its subject, the v1
card, the structured answer (pydantic v2). Pure.

``validate_content`` is the one gate (used by ``check-event`` and the prompt builder); ``schema_verdict``
checks the same by the packaged JSON Schema (bot/schemas/dev.agentpod.permission.v2.json, draft 2020-12
+ x-uniqueBy).

Parts: ``models`` (the pydantic models), ``validate`` (``validate_content``, answers from content),
``schema`` (the JSON Schema and its checker), ``timestamps`` (strict RFC 3339, ``iso_ms`` for the wire),
``states`` (the ``State`` and ``Via`` StrEnums: the words a state or a settlement path may be, shared by
record, store, prompts, answers and API; ``VIA_WORDS``: a via as people read it), ``ledger`` (the ledger's
chain), ``checkpoints`` (its checkpoints read back from a room: the state event, the older notice, a
redacted one as a gap naming the seqs it covered).

Also: ``_util`` (small helpers shared by the model and the schema checks), ``kinds`` (what a request asks).
"""

from bot.events.models import (
    ANSWER_KEY,
    CARD_KEY,
    SUBJECT_SCHEMA,
    SUITE_EVENT_TYPE,
    AnswerSubject,
    Card,
    CardOption,
    PermissionAnswer,
    PermissionOption,
    PermissionV2,
    PreviewField,
    PreviewItem,
    PreviewText,
    Subject,
)
from bot.events.schema import format_checker, load_schema, schema_verdict, unique_by_problem
from bot.events.timestamps import format_utc_ms, is_rfc3339, parse_rfc3339
from bot.events.validate import EventError, answer_from_content, validate_answer, validate_content

__all__ = [
    "ANSWER_KEY",
    "CARD_KEY",
    "SUBJECT_SCHEMA",
    "SUITE_EVENT_TYPE",
    "AnswerSubject",
    "Card",
    "CardOption",
    "EventError",
    "PermissionAnswer",
    "PermissionOption",
    "PermissionV2",
    "PreviewField",
    "PreviewItem",
    "PreviewText",
    "Subject",
    "answer_from_content",
    "format_checker",
    "format_utc_ms",
    "is_rfc3339",
    "load_schema",
    "parse_rfc3339",
    "schema_verdict",
    "unique_by_problem",
    "validate_answer",
    "validate_content",
]
