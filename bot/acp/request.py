"""One ``session/request_permission`` from the agent (:class:`Request`): the door's request
(:class:`bot.door.request.DaemonRequest`, submitted, polled, cancelled and answered) whose params are the
agent's, read as ACP's ``RequestPermissionRequest`` (:mod:`bot.acp.messages`). Params that do not fit never
reach the daemon: they get the fallback answer at once.

What the daemon gets is the params as sent, completed: the proxy's own fields (``key``, ``label``, ``cwd``,
``toolCallContext``: bot.util.digest's ``EXTRAS``) are set here, never taken from the agent; ``toolCallContext``
holds what earlier ``tool_call`` updates said of the tool call and the request leaves out
(:class:`bot.acp.toolcalls.ToolCallCache`), which the cache then learns.
"""

from __future__ import annotations

from typing import Any, Protocol

from acp.schema import RequestPermissionRequest

from bot.acp import messages
from bot.acp.toolcalls import ToolCallCache
from bot.door.request import DaemonRequest, proxy_fields
from bot.door.request import Host as DoorHost
from bot.util.digest import EXTRAS


class Host(DoorHost, Protocol):
    """What an ACP request needs of the proxy (:class:`bot.acp.proxy.Proxy` is one): a door's, and the cache."""

    cache: ToolCallCache


class Request(DaemonRequest):
    """One permission request of the agent's."""

    proxy: Host

    def __init__(self, proxy: Host, msg: dict[str, Any], n: int) -> None:
        super().__init__(proxy, msg, n)
        self.acp: RequestPermissionRequest | None = None
        try:
            self.acp = messages.permission_request(self.params)
        except messages.BadMessage as e:
            self.invalid = str(e)
        if self.acp is not None:
            self.session_id = self.acp.session_id
            self.tool_call_id = self.acp.tool_call.tool_call_id
        self.log = self.log.bind(session_id=self.session_id, tool_call_id=self.tool_call_id)

    def body(self) -> dict[str, Any]:
        """The daemon submission: the params as sent, plus key, label, cwd and toolCallContext ({} when invalid)."""
        if self.acp is None:
            return {}
        params, cache = self.params, self.proxy.cache
        clash = [k for k in EXTRAS if k in params]
        if clash:
            self.log.warning("agent_params_dropped", message="fields the proxy sets are dropped", fields=clash)
        body = {k: v for k, v in params.items() if k not in EXTRAS}
        ctx = cache.completion(self.acp.session_id, params["toolCall"])
        cache.merge(self.acp.session_id, self.acp.tool_call)
        cwd = self.proxy.cwd_by_session.get(self.acp.session_id)
        proxy_fields(body, key=self.key, label=self.proxy.cfg.label, cwd=cwd)
        if ctx:
            body["toolCallContext"] = ctx
            self.log.info("tool_call_completed_from_updates", fields=sorted(ctx))
        return body
