"""What the agent is told: ACP ``RequestPermissionResponse`` results and errors (pure).

Built with the SDK's ``acp.schema`` models, so what reaches the agent is what the schema allows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from acp.schema import AllowedOutcome, DeniedOutcome, Error, RequestPermissionResponse
from pydantic import BaseModel

REQUEST_CANCELLED = -32800  # JSON-RPC "Request cancelled": ACP's reply to a request withdrawn by ``$/cancel_request``
WITHDRAWN = "withdrawn by the agent"


def wire(model: BaseModel) -> dict[str, Any]:
    """A model in ACP's wire form (camelCase, no nulls)."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def cancelled() -> dict[str, Any]:
    """``{"outcome": {"outcome": "cancelled"}}``."""
    return wire(RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled")))


def selected(option_id: str, feedback: str | None = None) -> dict[str, Any]:
    """``{"outcome": {"outcome": "selected", "optionId": ...}}``, with ``_meta.feedback`` when given."""
    outcome = AllowedOutcome(outcome="selected", option_id=option_id)
    return wire(RequestPermissionResponse(outcome=outcome, field_meta={"feedback": feedback} if feedback else None))


def is_cancelled(result: dict[str, Any]) -> bool:
    out = result.get("outcome")
    return isinstance(out, dict) and out.get("outcome") == "cancelled"


def result_from_record(rec: dict[str, Any]) -> dict[str, Any]:
    """The ACP ``RequestPermissionResponse`` for a settled daemon record (cancelled when no option)."""
    out = rec.get("outcome")
    oid = out.get("option_id") if isinstance(out, dict) else None
    if not isinstance(out, dict) or not isinstance(oid, str):
        return cancelled()
    fb = out.get("feedback")
    return selected(oid, fb if isinstance(fb, str) and fb else None)


def option_of(options: Any, kind: str) -> str | None:
    """The id of the first option of ACP ``kind`` (``allow_once``, ``reject_once``), or None."""
    for o in options if isinstance(options, list) else []:
        if isinstance(o, Mapping) and o.get("kind") == kind and isinstance(o.get("optionId"), str):
            return str(o["optionId"])
    return None


def reject_result(params: dict[str, Any]) -> dict[str, Any]:
    """A ``reject_once`` option when the request offers one, else the cancelled outcome.

    Read from the params as sent, not the model: the fallback answers requests that do not fit
    ACP too, and a reject option among malformed ones is still the safe answer.
    """
    reject = option_of(params.get("options"), "reject_once")
    return cancelled() if reject is None else selected(reject)


def after_cancel(cancel_answer: dict[str, Any] | None, current: dict[str, Any] | None) -> dict[str, Any]:
    """What the agent gets once the proxy tried to cancel a request in the daemon.

    ``cancel_answer`` is the record the cancel settled (None: the daemon said unknown or already
    settled); ``current`` the record as read after that. A request someone answered first gets that
    answer, so the agent, the record and the room agree; otherwise it is cancelled.
    """
    if cancel_answer is not None:
        return result_from_record(cancel_answer)
    if current is not None and current.get("state") not in (None, "pending"):
        return result_from_record(current)
    return cancelled()


def withdrawn_error(rpc_id: Any) -> dict[str, Any]:
    """The JSON-RPC error reply for a request the agent withdrew with ``$/cancel_request``."""
    return {"jsonrpc": "2.0", "id": rpc_id, "error": wire(Error(code=REQUEST_CANCELLED, message="Request cancelled"))}
