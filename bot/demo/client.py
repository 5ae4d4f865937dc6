"""The demo's ACP client (official SDK): starts the agent command, runs one prompt turn, reports.

It stands where Zed or any ACP client would. The agent command is ``permission-bot acp -- ...``,
so permission requests go to the daemon and never reach this client; if one does (the daemon
unreachable and the proxy forwarding), it is cancelled and said so.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, cast

from acp import PROTOCOL_VERSION, Client, spawn_agent_process, text_block
from acp.schema import (
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    Implementation,
    RequestPermissionResponse,
)

from bot.demo.agent import OUTCOME_PREFIX

Say = Callable[[str], None]


class DemoClient:
    """Prints what the agent says; keeps the agent's final ``OUTCOME`` line."""

    def __init__(self, say: Say) -> None:
        self.say = say
        self.outcome: str | None = None

    async def request_permission(self, options: Any, session_id: str, tool_call: Any,
                                 **kw: Any) -> RequestPermissionResponse:
        self.say("client: a permission request reached the client itself (is the daemon down?); cancelling it")
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        kind = getattr(update, "session_update", "")
        if kind == "agent_message_chunk":
            text = str(getattr(update.content, "text", "")).strip()
            if text.startswith(OUTCOME_PREFIX):
                self.outcome = text[len(OUTCOME_PREFIX) :]
            elif text:
                self.say(f"agent: {text}")
        elif kind == "tool_call":
            self.say(f"agent: tool call {update.title!r} ({update.status or 'pending'})")
        elif kind == "tool_call_update" and update.status:
            self.say(f"agent: tool call now {update.status}")


async def prompt_turn(conn: Any, session_id: str, text: str) -> str:
    """Run one turn on the agent's connection; returns its stop reason."""
    r = await conn.prompt(session_id=session_id, prompt=[text_block(text)])
    return str(r.stop_reason)


@contextlib.asynccontextmanager
async def open_session(client: DemoClient, command: list[str], env: Mapping[str, str], cwd: str,
                       stderr: int) -> AsyncIterator[tuple[Any, str]]:
    """Start ``command`` as the agent, initialize and open a session: (the connection, the session id); stops
    the agent on exit."""
    async with spawn_agent_process(
        cast(Client, client), command[0], *command[1:], env=dict(env), cwd=cwd, transport_kwargs={"stderr": stderr}
    ) as (conn, _proc):
        files = FileSystemCapabilities(read_text_file=False, write_text_file=False)
        await conn.initialize(protocol_version=PROTOCOL_VERSION,
                              client_capabilities=ClientCapabilities(fs=files, terminal=False),
                              client_info=Implementation(name="permission-bot-demo", version="1"))
        sess = await conn.new_session(cwd=cwd, mcp_servers=[])
        yield conn, str(sess.session_id)
