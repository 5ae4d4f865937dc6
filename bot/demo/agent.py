"""The demo's scripted ACP agent (official SDK): asks to run one command, then says what it was told.

``python -m bot.demo.agent`` speaks ACP on stdio. Each prompt turn announces a tool call
(``rm -rf build/``), asks ``session/request_permission`` with the four usual options and
ends the turn with one agent message: ``OUTCOME selected <optionId>`` or ``OUTCOME cancelled``.
Nothing is ever run: this agent only pretends.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from typing import Any

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
    ToolCallLocation,
    ToolCallUpdate,
)

COMMAND = "rm -rf build/"
TITLE = f"Run `{COMMAND}`"
TOOL_CALL_ID = "call_demo_1"
OPTIONS = (
    ("allow_once", "Allow once", "allow_once"),
    ("allow_always", "Always allow", "allow_always"),
    ("reject_once", "Reject", "reject_once"),
    ("reject_always", "Never allow", "reject_always"),
)
OUTCOME_PREFIX = "OUTCOME "


class DemoAgent(Agent):
    """One scripted tool call per prompt turn."""

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **kw: Any
    ) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(),
            agent_info=Implementation(name="permission-bot-demo-agent", version="1"),
        )

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kw: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id=f"demo_{uuid.uuid4().hex[:8]}")

    async def cancel(self, session_id: str, **kw: Any) -> None:
        return None

    async def prompt(self, prompt: Any, session_id: str, **kw: Any) -> PromptResponse:
        conn = self._conn
        raw_input = {"command": COMMAND, "cwd": "."}
        locations = [ToolCallLocation(path="build/")]
        await conn.session_update(
            session_id,
            start_tool_call(
                TOOL_CALL_ID, TITLE, kind="execute", status="pending", raw_input=raw_input, locations=locations
            ),
        )
        await conn.session_update(
            session_id, update_agent_message_text(f"I want to run `{COMMAND}` to start from a clean build.\n")
        )
        tool_call = ToolCallUpdate(
            tool_call_id=TOOL_CALL_ID,
            title=TITLE,
            kind="execute",
            status="pending",
            raw_input=raw_input,
            locations=locations,
        )
        options = [PermissionOption(option_id=o, name=n, kind=k) for o, n, k in OPTIONS]
        resp = await conn.request_permission(session_id=session_id, tool_call=tool_call, options=options)
        outcome = resp.outcome
        if isinstance(outcome, AllowedOutcome):
            chosen = str(outcome.option_id)
            allowed = chosen.startswith("allow")
            await conn.session_update(
                session_id, update_tool_call(TOOL_CALL_ID, status="completed" if allowed else "failed")
            )
            await conn.session_update(session_id, update_agent_message_text(f"{OUTCOME_PREFIX}selected {chosen}"))
            return PromptResponse(stop_reason="end_turn")
        await conn.session_update(session_id, update_tool_call(TOOL_CALL_ID, status="failed"))
        await conn.session_update(session_id, update_agent_message_text(f"{OUTCOME_PREFIX}cancelled"))
        return PromptResponse(stop_reason="cancelled")


def main() -> int:
    """Serve ACP on stdin/stdout until the client goes away."""
    try:
        asyncio.run(run_agent(DemoAgent()))
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
