"""A scripted ACP agent on the official SDK (compatible with contract-check's acc_agent.py).

Each prompt's text is a JSON script:
  {"tool_call_id", "title", "kind", "raw_input", "locations": [path], "options": [[id, name, kind]],
   "sparse": bool, "content": [ACP tool call content]?, "exit_after": seconds?, "exit_code": int?}
The agent announces the tool call (session/update "tool_call"), asks permission (with only the
toolCallId when "sparse"), then reports "OUTCOME <json>" as an agent message and ends the turn.
"exit_after": the process exits with "exit_code" (default 3) that many seconds after asking.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
import time
import uuid
from typing import Any

import rfc8785

from bot.util.lean_models import lean

with lean():  # the SDK's ~280 models declared cheaply: this agent starts many times a run
    import acp.schema  # noqa: F401
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
    DeniedOutcome,
    Implementation,
    PermissionOption,
    RequestPermissionRequest,
    ToolCallLocation,
    ToolCallUpdate,
)
from acp.utils import serialize_params


class ScriptedAgent(Agent):
    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **kw: Any
    ) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(),
            agent_info=Implementation(name="scripted-agent", version="1"),
        )

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kw: Any) -> NewSessionResponse:
        sid = os.environ.get("SCRIPTED_SESSION") or f"sa_{uuid.uuid4().hex[:10]}"
        return NewSessionResponse(session_id=sid)

    async def cancel(self, session_id: str, **kw: Any) -> None:
        return None

    async def prompt(self, prompt: Any, session_id: str, **kw: Any) -> PromptResponse:
        s = json.loads("".join(getattr(b, "text", "") for b in prompt))
        tcid = s.get("tool_call_id", "call_1")
        locs = [ToolCallLocation(path=p) for p in s.get("locations", [])] or None
        content = s.get("content")
        await self._conn.session_update(
            session_id,
            start_tool_call(
                tcid,
                s["title"],
                kind=s.get("kind", "execute"),
                status="pending",
                raw_input=s.get("raw_input"),
                locations=locs,
                content=content,
            ),
        )
        if s.get("sparse"):
            tc = ToolCallUpdate(tool_call_id=tcid)
        else:
            tc = ToolCallUpdate(
                tool_call_id=tcid,
                title=s["title"],
                kind=s.get("kind", "execute"),
                status="pending",
                raw_input=s.get("raw_input"),
                locations=locs,
                content=content,
            )
        opts = [PermissionOption(option_id=o[0], name=o[1], kind=o[2]) for o in s["options"]]
        sent = serialize_params(RequestPermissionRequest(session_id=session_id, tool_call=tc, options=opts))
        digest = hashlib.sha256(rfc8785.dumps(sent)).hexdigest()
        if s.get("exit_after") is not None:
            code = int(s.get("exit_code", 3))
            asyncio.get_running_loop().call_later(float(s["exit_after"]), os._exit, code)
        t0 = time.perf_counter()
        resp = await self._conn.request_permission(session_id=session_id, tool_call=tc, options=opts)
        elapsed_ms = (time.perf_counter() - t0) * 1000
        out = resp.outcome
        result: dict[str, Any]
        if isinstance(out, DeniedOutcome):
            result = {"outcome": "cancelled"}
        else:
            result = {"outcome": "selected", "optionId": out.option_id}
        result.update(tool_call_id=tcid, sent_digest=digest, elapsed_ms=elapsed_ms)
        meta = getattr(resp, "field_meta", None)
        if meta:
            result["_meta"] = meta
        await self._conn.session_update(session_id, update_tool_call(tcid, status="completed"))
        await self._conn.session_update(session_id, update_agent_message_text("OUTCOME " + json.dumps(result)))
        return PromptResponse(stop_reason="cancelled" if result["outcome"] == "cancelled" else "end_turn")


if __name__ == "__main__":
    try:
        asyncio.run(run_agent(ScriptedAgent()))
    except KeyboardInterrupt:
        sys.exit(130)
