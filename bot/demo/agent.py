"""The demo's scripted ACP agent (official SDK): asks to run one command, then says what it was told.

``python -m bot.demo.agent`` speaks ACP on stdio. Each prompt turn announces a tool call
(``rm -rf build/``), asks ``session/request_permission`` with the four usual options and
ends the turn with one agent message: ``OUTCOME selected <optionId>`` or ``OUTCOME cancelled``.
Nothing is ever run: this agent only pretends.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from typing import Any, cast

from acp import (
    PROTOCOL_VERSION,
    Agent,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    run_agent,
    start_tool_call,
    update_agent_message_text,
    update_tool_call,
)
from acp.schema import (
    AgentCapabilities,
    AllowedOutcome,
    Implementation,
    PermissionOption,
    PermissionOptionKind,
    StopReason,
    ToolCallLocation,
    ToolCallStatus,
    ToolCallUpdate,
)

COMMAND = "rm -rf build/"
TITLE = f"Run `{COMMAND}`"
TOOL_CALL_ID = "call_demo_1"
OPTIONS: tuple[tuple[str, str, PermissionOptionKind], ...] = (
    ("allow_once", "Allow once", "allow_once"),
    ("allow_always", "Always allow", "allow_always"),
    ("reject_once", "Reject", "reject_once"),
    ("reject_always", "Never allow", "reject_always"),
)
OUTCOME_PREFIX = "OUTCOME "


class DemoAgent:
    """One scripted tool call per prompt turn (the ACP methods a client calls here)."""

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
                         **kw: Any) -> InitializeResponse:
        me = Implementation(name="permission-bot-demo-agent", version="1")
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, agent_capabilities=AgentCapabilities(),
                                  agent_info=me)

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kw: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id=f"demo_{uuid.uuid4().hex[:8]}")

    async def cancel(self, session_id: str, **kw: Any) -> None:
        return None

    async def prompt(self, prompt: Any, session_id: str, **kw: Any) -> PromptResponse:
        conn = self._conn
        raw_input = {"command": COMMAND, "cwd": "."}
        locations = [ToolCallLocation(path="build/")]
        start = start_tool_call(TOOL_CALL_ID, TITLE, kind="execute", status="pending", raw_input=raw_input,
                                locations=locations)
        await conn.session_update(session_id, start)
        await conn.session_update(
            session_id, update_agent_message_text(f"I want to run `{COMMAND}` to start from a clean build.\n")
        )
        tool_call = ToolCallUpdate(tool_call_id=TOOL_CALL_ID, title=TITLE, kind="execute", status="pending",
                                   raw_input=raw_input, locations=locations)
        options = [PermissionOption(option_id=o, name=n, kind=k) for o, n, k in OPTIONS]
        resp = await conn.request_permission(session_id=session_id, tool_call=tool_call, options=options)
        outcome = resp.outcome
        stop: StopReason
        if isinstance(outcome, AllowedOutcome):
            chosen = str(outcome.option_id)
            status: ToolCallStatus = "completed" if chosen.startswith("allow") else "failed"
            said, stop = f"{OUTCOME_PREFIX}selected {chosen}", "end_turn"
        else:
            status, said, stop = "failed", f"{OUTCOME_PREFIX}cancelled", "cancelled"
        with contextlib.suppress(ConnectionError):  # the client may be gone already (Ctrl-C)
            await conn.session_update(session_id, update_tool_call(TOOL_CALL_ID, status=status))
            await conn.session_update(session_id, update_agent_message_text(said))
        return PromptResponse(stop_reason=stop)


def main() -> int:
    """Serve ACP on stdin/stdout until the client goes away."""
    try:
        asyncio.run(run_agent(cast(Agent, DemoAgent())))
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
