"""What the daemon gets for one permission request: the agent's params as sent, completed.

The proxy's own fields (``key``, ``label``, ``cwd``, ``toolCallContext``: bot.util.digest's ``EXTRAS``) are
set here, never taken from the agent; ``toolCallContext`` holds what earlier ``tool_call`` updates said of the
tool call and the request leaves out (:class:`bot.acp.toolcalls.ToolCallCache`), which the cache then learns.
"""

from __future__ import annotations

from typing import Any

from acp.schema import RequestPermissionRequest

from bot.acp.toolcalls import ToolCallCache
from bot.door.request import proxy_fields
from bot.util.digest import EXTRAS


def submission_body(
    params: dict[str, Any],
    acp: RequestPermissionRequest,
    cache: ToolCallCache,
    log: Any,
    *,
    key: str,
    label: str | None,
    cwd: str | None,
) -> dict[str, Any]:
    """The submission for ``params`` (``acp``, their parsed form), with the proxy's fields set."""
    clash = [k for k in EXTRAS if k in params]
    if clash:
        log.warning("agent_params_dropped", message="fields the proxy sets are dropped", fields=clash)
    body = {k: v for k, v in params.items() if k not in EXTRAS}
    ctx = cache.completion(acp.session_id, params["toolCall"])
    cache.merge(acp.session_id, acp.tool_call)
    proxy_fields(body, key=key, label=label, cwd=cwd)
    if ctx:
        body["toolCallContext"] = ctx
        log.info("tool_call_completed_from_updates", fields=sorted(ctx))
    return body
