"""Pydantic v2 models of the Matrix wire formats (seed 000).

Strict: no coercion of ``"1"`` or ``true`` to ``1``. Integral JSON numbers written as ``1.0`` count
as integers, as JSON Schema says. Unknown properties are kept (``model_extra``) and never refused.
Optional fields may be absent but not ``null`` (the schema types them without null).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from bot.events.timestamps import is_rfc3339

SUITE_EVENT_TYPE = "dev.agentpod.permission.v2"
SUBJECT_SCHEMA = "harness-permission/v1"
CARD_KEY = "dev.agentpod.permission"
ANSWER_KEY = "dev.agentpod.permission.answer"


def _whole_number(value: object) -> object:
    """Let ``1.0`` through as ``1``; everything else goes to the strict int check unchanged."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _not_null(value: object) -> object:
    if value is None:
        raise PydanticCustomError("not_null", "must not be null")
    return value


def _rfc3339(value: str) -> str:
    if not is_rfc3339(value):
        raise PydanticCustomError("rfc3339", "not an RFC 3339 date-time", {"value": value})
    return value


WholeInt = Annotated[int, BeforeValidator(_whole_number), Field(strict=True)]
NonEmpty = Annotated[StrictStr, Field(min_length=1)]
DateTime = Annotated[StrictStr, AfterValidator(_rfc3339)]
NotNull = BeforeValidator(_not_null)


class _Wire(BaseModel):
    """Strict, keeps unknown properties."""

    model_config = ConfigDict(strict=True, extra="allow", frozen=True)


class PermissionOption(_Wire):
    """One option: ``id`` is what an answer names, ``meaning``/``scope`` what choosing it does."""

    id: Annotated[StrictStr, Field(min_length=1, max_length=200)]
    label: Annotated[StrictStr, Field(max_length=200)]
    meaning: Literal["approve", "reject", "choose"]
    scope: Annotated[Literal["once", "always"] | None, NotNull] = None


class PreviewField(_Wire):
    """A short labelled value (tool, kind, location)."""

    type: Literal["field"]
    label: StrictStr
    value: StrictStr


class PreviewText(_Wire):
    """A labelled block of text (command, diff)."""

    type: Literal["text"]
    label: StrictStr
    text: StrictStr


PreviewItem = Annotated[PreviewField | PreviewText, Field(discriminator="type")]


class Subject(_Wire):
    """The ``harness-permission/v1`` subject: what is being decided, and until when."""

    id: StrictStr
    digest: StrictStr
    schema_: Literal["harness-permission/v1"] = Field(alias="schema")
    revision: WholeInt
    expires_at: DateTime
    preview: Annotated[list[PreviewItem] | None, NotNull] = None
    preview_complete: Annotated[StrictBool | None, NotNull] = None


class CardOption(_Wire):
    """An option of the v1 card."""

    option_id: NonEmpty
    name: StrictStr


class Card(_Wire):
    """The v1 card under ``"dev.agentpod.permission"``."""

    schema_version: Annotated[WholeInt, Field(ge=1)]
    session_id: NonEmpty
    request_seq: Annotated[WholeInt, Field(ge=0)]
    title: StrictStr
    options: list[CardOption]


class PermissionV2(_Wire):
    """A ``dev.agentpod.permission.v2`` content object."""

    msgtype: Annotated[Literal["m.text"] | None, NotNull] = None
    body: Annotated[StrictStr | None, NotNull] = None
    suite_event_type: Literal["dev.agentpod.permission.v2"]
    schema_version: Annotated[WholeInt, Field(ge=1)]
    request_id: NonEmpty
    session_id: NonEmpty
    request_seq: Annotated[WholeInt, Field(ge=0)]
    title: StrictStr
    tool_kind: Annotated[NonEmpty | None, NotNull] = None
    options: Annotated[list[PermissionOption], Field(min_length=1, max_length=20)]
    subject: Subject
    card: Annotated[Card | None, NotNull] = Field(default=None, alias="dev.agentpod.permission")

    @field_validator("options")
    @classmethod
    def _unique_ids(cls, options: list[PermissionOption]) -> list[PermissionOption]:
        """x-uniqueBy ``options[].id``."""
        seen: set[str] = set()
        for index, option in enumerate(options):
            if option.id in seen:
                raise PydanticCustomError(
                    "unique_by", "repeats {value}", {"index": index, "key": "id", "value": option.id}
                )
            seen.add(option.id)
        return options


class AnswerSubject(_Wire):
    """What the answerer saw: a stale digest or revision is refused by the caller."""

    digest: StrictStr | None = None
    revision: WholeInt | None = None


class PermissionAnswer(_Wire):
    """The structured answer under ``"dev.agentpod.permission.answer"``: one of ``option_id`` (an option),
    ``option_ids`` (several choices of a multi-select question) or ``text`` (the person's own words to a question
    that takes them)."""

    request_id: NonEmpty
    option_id: NonEmpty | None = None
    option_ids: Annotated[list[NonEmpty], Field(min_length=1, max_length=20)] | None = None
    text: NonEmpty | None = None
    subject: AnswerSubject | None = None
    feedback: StrictStr | None = None

    @model_validator(mode="after")
    def _one_answer(self) -> PermissionAnswer:
        given = [k for k in ("option_id", "option_ids", "text") if getattr(self, k) is not None]
        if len(given) != 1:
            raise PydanticCustomError("one_answer", "needs exactly one of option_id, option_ids or text")
        return self
