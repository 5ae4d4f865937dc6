"""The ACP ``params`` the proxy acts on, read with the SDK's ``acp.schema`` models (one place per shape).

:mod:`bot.acp.filters` judges only the JSON-RPC envelope (method, id, a params object); every
``params`` the proxy acts on is read here. The models take the wire's camelCase names, ignore
unknown fields and salvage what ACP marks optional (a malformed ``title`` becomes None, a
malformed content item or location is dropped), so agents' extensions pass and a toolCall may
carry only its ``toolCallId``. Nothing is re-serialised from a model on its way through: the
relay and the daemon submission keep the agent's bytes and values.
"""

from __future__ import annotations

from typing import Any, TypeVar

from acp.schema import (
    CancelNotification,
    CancelRequestNotification,
    CloseSessionRequest,
    CreateFormRequestElicitationRequest,
    CreateFormSessionElicitationRequest,
    CreateUrlRequestElicitationRequest,
    CreateUrlSessionElicitationRequest,
    RequestPermissionRequest,
    SessionNotification,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
)
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)

ToolCallFields = ToolCallUpdate | ToolCallStart | ToolCallProgress
TOOL_CALL_UPDATES = ("tool_call", "tool_call_update")
# What a permission prompt needs from a tool call: the model's attribute names, and ACP's wire names.
_CONTEXT_ATTRS = {"title", "kind", "raw_input", "content", "locations", "field_meta"}
CONTEXT_FIELDS = ("title", "kind", "rawInput", "content", "locations", "_meta")


def empty(value: Any) -> bool:
    """Missing in all but name: null, ``""``, ``[]`` or ``{}``."""
    return value is None or value == "" or value == [] or value == {}


class BadMessage(ValueError):
    """ACP params the proxy will not act on: the message names the first wrong field."""


def parse(model: type[M], params: Any, *, strict: bool = False) -> M:
    """``params`` as ``model``; BadMessage naming the field when it does not fit (``field.path: what is wrong``,
    the first error pydantic found, in wire names)."""
    if not isinstance(params, dict):
        raise BadMessage("params: expected an object")
    try:
        return model.model_validate(params, strict=strict)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "params"
        raise BadMessage(f"{where}: {err['msg']}") from None


def permission_request(params: Any) -> RequestPermissionRequest:
    """``session/request_permission`` params: sessionId, toolCall (toolCallId at least), options."""
    return parse(RequestPermissionRequest, params)


Elicitation = (
    CreateFormSessionElicitationRequest
    | CreateFormRequestElicitationRequest
    | CreateUrlSessionElicitationRequest
    | CreateUrlRequestElicitationRequest
)


def elicitation_request(params: Any) -> Elicitation:
    """``elicitation/create`` params: form mode (``requestedSchema``) or URL mode (``url``), tied to a session
    (``sessionId``, optional ``toolCallId``) or to a request (``requestId``)."""
    mode = params.get("mode") if isinstance(params, dict) else None
    session = isinstance(params, dict) and "sessionId" in params
    if mode == "form" and session:
        return parse(CreateFormSessionElicitationRequest, params)
    if mode == "form":
        return parse(CreateFormRequestElicitationRequest, params)
    if mode == "url" and session:
        return parse(CreateUrlSessionElicitationRequest, params)
    if mode == "url":
        return parse(CreateUrlRequestElicitationRequest, params)
    raise BadMessage('mode: expected "form" or "url"')


def session_of(model: type[CancelNotification] | type[CloseSessionRequest], params: Any) -> str | None:
    """The ``sessionId`` of a ``session/cancel`` or ``session/close``, or None when it has none."""
    try:
        return parse(model, params).session_id
    except BadMessage:
        return None


def withdrawn_id(params: Any) -> int | str | None:
    """The ``requestId`` a ``$/cancel_request`` names, exactly as sent (strict: ``true`` or ``1.0`` are
    not the request ``1``), or None."""
    try:
        return parse(CancelRequestNotification, params, strict=True).request_id
    except BadMessage:
        return None


def tool_call_note(params: Any) -> tuple[str, ToolCallFields, bool] | None:
    """(sessionId, the tool call's fields, whether it starts afresh) of a ``session/update`` that
    announces (``tool_call``) or refines (``tool_call_update``) a tool call; None for anything else."""
    upd = params.get("update") if isinstance(params, dict) else None
    if not isinstance(upd, dict) or upd.get("sessionUpdate") not in TOOL_CALL_UPDATES:
        return None  # the other kinds are not read, so not validated either
    try:
        note = parse(SessionNotification, params)
    except BadMessage:
        return None
    if isinstance(note.update, ToolCallStart):
        return note.session_id, note.update, True
    if isinstance(note.update, ToolCallProgress):
        return note.session_id, note.update, False
    return None


def context_fields(tool_call: ToolCallFields) -> dict[str, Any]:
    """The fields a prompt needs that ``tool_call`` carries, non-empty, in ACP's wire form."""
    wire: dict[str, Any] = tool_call.model_dump(mode="json", by_alias=True, exclude_none=True, include=_CONTEXT_ATTRS)
    return {k: v for k, v in wire.items() if not empty(v)}
