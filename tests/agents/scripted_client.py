"""An ACP client on the official SDK (compatible with contract-check's acc_client.py).

Starts AGENT_CMD (here: the proxy), runs one prompt turn per script and prints JSON lines:
  {"event": "session", "session_id"}, {"event": "outcome", "session_id", "outcome"},
  {"event": "permission_request_reached_client", "options", "tool_call"},
  {"event": "turn_error", "error"}, {"event": "done", ...}, {"event": "exit", "returncode"}.
Usage: scripted_client.py SCRIPT_JSON [--cancel-after S] [--sequential] [--answer OPTION_ID]
                          [--exit-after S] [--env K=V]... [--cwd DIR] [--cancel-when FILE] -- AGENT_CMD...
--cwd: the session's working directory (default /tmp), and the agent's when given.
--cancel-when: send session/cancel once FILE exists (the test creates it when it is ready).
--answer: how to answer permission requests that reach the client (default: cancelled).
--exit-after: leave after S seconds (closing the agent's stdin) whether the turns ended or not.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

from bot.util.lean_models import lean

with lean():  # the SDK's ~280 models declared cheaply: this process starts many times a run
    import acp.schema  # noqa: F401
from acp import PROTOCOL_VERSION, Client, spawn_agent_process, text_block
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    Implementation,
    RequestPermissionResponse,
)


def emit(**kw: Any) -> None:
    print(json.dumps(kw), flush=True)


class Recorder(Client):
    def __init__(self, answer: str | None) -> None:
        self.answer = answer
        self.permission_requests = 0

    async def request_permission(
        self, options: Any, session_id: str, tool_call: Any, **kw: Any
    ) -> RequestPermissionResponse:
        self.permission_requests += 1
        emit(
            event="permission_request_reached_client",
            session_id=session_id,
            options=[o.option_id for o in options],
            tool_call_id=tool_call.tool_call_id,
        )
        if self.answer:
            return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=self.answer))
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        if getattr(update, "session_update", "") == "agent_message_chunk":
            t = getattr(update.content, "text", "")
            if t.startswith("OUTCOME "):
                emit(event="outcome", session_id=session_id, outcome=json.loads(t[len("OUTCOME ") :]))


async def main() -> int:
    argv = sys.argv[1:]
    sep = argv.index("--")
    ap = argparse.ArgumentParser()
    ap.add_argument("script")
    ap.add_argument("--cancel-after", type=float)
    ap.add_argument("--sequential", action="store_true")
    ap.add_argument("--answer")
    ap.add_argument("--exit-after", type=float)
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--cwd")
    ap.add_argument("--cancel-when")
    a = ap.parse_args(argv[:sep])
    agent = argv[sep + 1 :]
    script = json.loads(a.script)
    scripts = script if isinstance(script, list) else [script]
    env = {k: os.environ[k] for k in ("PYTHONPATH", "PERMISSION_BOT_URL", "PERMISSION_BOT_TOKEN") if k in os.environ}
    env.update(kv.split("=", 1) for kv in a.env)
    client = Recorder(a.answer)
    async with spawn_agent_process(
        client, agent[0], *agent[1:], env=env, cwd=a.cwd, transport_kwargs={"stderr": None}
    ) as (
        conn,
        proc,
    ):
        await conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=False, write_text_file=False), terminal=False
            ),
            client_info=Implementation(name="scripted-client", version="1"),
        )
        sess = await conn.new_session(cwd=a.cwd or "/tmp", mcp_servers=[])
        emit(event="session", session_id=sess.session_id)

        async def turn(s: Any) -> str | None:
            try:
                r = await conn.prompt(session_id=sess.session_id, prompt=[text_block(json.dumps(s))])
            except Exception as e:
                emit(event="turn_error", error=f"{type(e).__name__}: {e}")
                return None
            return str(r.stop_reason)

        async def turns() -> list[str | None]:
            watch = asyncio.create_task(cancel_when(a.cancel_when)) if a.cancel_when else None
            try:
                if a.sequential:
                    return [await turn(s) for s in scripts]
                tasks = [asyncio.create_task(turn(s)) for s in scripts]
                if a.cancel_after is not None:
                    await asyncio.sleep(a.cancel_after)
                    await conn.cancel(session_id=sess.session_id)
                return list(await asyncio.gather(*tasks))
            finally:
                if watch:
                    watch.cancel()

        async def cancel_when(path: str) -> None:
            while not os.path.exists(path):
                await asyncio.sleep(0.05)
            await conn.cancel(session_id=sess.session_id)

        all_turns = asyncio.ensure_future(turns())
        done, _ = await asyncio.wait({all_turns}, timeout=a.exit_after)
        if done:
            emit(
                event="done",
                session_id=sess.session_id,
                stop_reasons=all_turns.result(),
                client_permission_requests=client.permission_requests,
            )
        else:
            all_turns.cancel()
            emit(event="leaving", session_id=sess.session_id)
    emit(event="exit", returncode=proc.returncode)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
