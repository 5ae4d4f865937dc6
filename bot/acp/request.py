"""One ``session/request_permission`` from the agent (:class:`Request`): the door's request
(:class:`bot.door.request.DaemonRequest`, submitted, polled, cancelled and answered) whose params are the
agent's, read as ACP's ``RequestPermissionRequest`` (:mod:`bot.acp.messages`). Params that do not fit never
reach the daemon: they get the fallback answer at once. The submission is the params as sent, completed from
earlier tool-call updates (:mod:`bot.acp.submission`).
"""

from __future__ import annotations

from typing import Any, Protocol

from acp.schema import RequestPermissionRequest

from bot.acp import messages
from bot.acp.submission import submission_body
from bot.acp.toolcalls import ToolCallCache
from bot.door.request import DaemonRequest
from bot.door.request import Host as DoorHost


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
        cwd = self.proxy.cwd_by_session.get(self.session_id) if self.session_id is not None else None
        return submission_body(
            self.params, self.acp, self.proxy.cache, self.log, key=self.key, label=self.proxy.cfg.label, cwd=cwd
        )
