"""The scripted Claude of :mod:`tests.support.model_api`: what it does next, by what the user's prompt names, and
its Anthropic Messages reply (streamed or not).

``RUN: cmd``: a shell tool call running ``cmd`` (to the end of that line), once; ``ASK: {json}``: AskUserQuestion
with that input, once; ``PLAN: title``: plan mode's flow (with ``WRITE: path``, the file written once the plan is
approved). Then a short text ends the turn.
"""

from __future__ import annotations

import json
import re
from typing import Any

from aiohttp import web

RUN = re.compile(r"RUN: ([^\n\"\\]+)")
ASK = re.compile(r"ASK: (\{.*\})")  # the model calls AskUserQuestion with this JSON input
PLAN = re.compile(r"PLAN: ([^\n]+)")  # plan mode: the model enters it, writes its plan, asks to exit
PLAN_FILE = re.compile(r"(/[^\s\"'`\\]*/\.claude/plans/[A-Za-z0-9._-]+\.md)")
WRITE = re.compile(r"WRITE: ([^\s\"\\]+)")  # with PLAN: once the plan is approved, the model writes this file
DONE_TEXT = "Done."


def command(text: str) -> str | None:
    """The command ``text`` names after ``RUN: ``, or None."""
    m = RUN.search(text)
    return m.group(1).strip() if m else None


def tool_results(messages: list[Any]) -> list[tuple[Any, str]]:
    """Every tool result in the conversation: (its tool_use_id, its text)."""
    return [(b.get("tool_use_id"), _text_of(b)) for m in messages
            for b in (m.get("content") if isinstance(m.get("content"), list) else [])
            if isinstance(b, dict) and b.get("type") == "tool_result"]


def next_call(body: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The tool call (name, input) the model makes for this request, or None: a text answer ends the turn."""
    messages = body.get("messages") or []
    tools = {t.get("name") for t in body.get("tools") or []}
    last_content = (messages[-1] if messages else {}).get("content")
    has_result = isinstance(last_content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in last_content
    )
    return _next_tool(messages, tools, body, has_result)


async def messages_reply(
    request: web.Request, body: dict[str, Any], call: tuple[str, dict[str, Any]] | None, n: int
) -> web.StreamResponse:
    """The Messages API's answer: ``call`` made (``n`` makes its id unique), or the turn's closing text."""
    if call is not None:
        name, tool_input = call
        blocks: list[dict[str, Any]] = [
            {"type": "tool_use", "id": f"toolu_{n}", "name": name, "input": {}}
        ]
        deltas = [{"type": "input_json_delta", "partial_json": json.dumps(tool_input)}]
        stop = "tool_use"
    else:
        blocks = [{"type": "text", "text": ""}]
        deltas = [{"type": "text_delta", "text": DONE_TEXT}]
        stop = "end_turn"
    model = body.get("model", "claude")
    if not body.get("stream"):
        content = [
            {**blocks[0], "input": tool_input} if stop == "tool_use" else {"type": "text", "text": DONE_TEXT}
        ]
        return web.json_response(
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 5},
            }
        )
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)

    async def send(kind: str, data: dict[str, Any]) -> None:
        await resp.write(f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode())

    await send(
        "message_start",
        {
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 1},
            }
        },
    )
    await send("content_block_start", {"index": 0, "content_block": blocks[0]})
    for d in deltas:
        await send("content_block_delta", {"index": 0, "delta": d})
    await send("content_block_stop", {"index": 0})
    await send(
        "message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 5}}
    )
    await send("message_stop", {})
    await resp.write_eof()
    return resp


def _next_tool(
    messages: list[Any], tools: set[Any], body: dict[str, Any], has_result: bool
) -> tuple[str, dict[str, Any]] | None:
    """The tool call the model makes next, or None (a text answer ends the turn).

    ``RUN: cmd``: Bash once. ``ASK: {json}``: AskUserQuestion once. ``PLAN: title``: plan mode's flow
    (EnterPlanMode, the plan written to the plan file its reminder names, ExitPlanMode), then done; with
    ``WRITE: path`` too, a plan approved (its tool_result no error) is followed by a Write of that file."""
    used = _tools_used(messages)
    plan = PLAN.search(_first_text(messages))
    if plan is not None:
        text = f"# Plan\n\n1. {plan.group(1).strip()}\n2. Run the tests\n"
        if not used:
            return "EnterPlanMode", {}
        if used[-1] == "EnterPlanMode":
            path = PLAN_FILE.search(json.dumps(messages) + json.dumps(body.get("system")))
            if path is not None:
                return "Write", {"file_path": path.group(1), "content": text}
            return "ExitPlanMode", {"plan": text}
        if used[-1] == "Write" and "ExitPlanMode" not in used:
            return "ExitPlanMode", {}
        write = WRITE.search(_first_text(messages))
        if used[-1] == "ExitPlanMode" and write is not None and not _result_error(messages, "ExitPlanMode"):
            return "Write", {"file_path": write.group(1), "content": "M1\n"}
        return None
    if used or has_result:
        return None
    ask = _ask(messages[:1])
    if "AskUserQuestion" in tools and ask is not None:
        return "AskUserQuestion", ask
    cmd = command(json.dumps(messages[:1]))
    if "Bash" in tools and cmd:
        return "Bash", {"command": cmd, "description": "Touch"}
    return None


def _tools_used(messages: list[Any]) -> list[str]:
    return [
        str(b.get("name"))
        for m in messages
        if m.get("role") == "assistant" and isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]


def _result_error(messages: list[Any], name: str) -> bool:
    """Whether the result of the last call of tool ``name`` was an error (a refusal)."""
    blocks = [b for m in messages if isinstance(m.get("content"), list) for b in m["content"] if isinstance(b, dict)]
    ids = [b.get("id") for b in blocks if b.get("type") == "tool_use" and b.get("name") == name]
    return any(b.get("type") == "tool_result" and b.get("tool_use_id") == ids[-1] and b.get("is_error") is True
               for b in blocks) if ids else False


def _first_text(messages: list[Any]) -> str:
    content = messages[0].get("content") if messages else None
    texts = [content] if isinstance(content, str) else [
        b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]
    out = []
    for t in texts:
        try:
            t = json.loads(t) if t.startswith('"') else t  # a prompt the scripted client sent JSON-quoted
        except ValueError:
            pass
        out.append(str(t))
    return "\n".join(out)


def _ask(messages: list[Any]) -> dict[str, Any] | None:
    """The AskUserQuestion input the first user message names after ``ASK: `` (one JSON object), or None."""
    for m in messages:
        content = m.get("content")
        texts = [content] if isinstance(content, str) else [
            b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]
        for t in texts:
            try:
                t = json.loads(t) if t.startswith('"') else t  # a prompt the scripted client sent JSON-quoted
            except ValueError:
                pass
            if isinstance(t, str) and (found := ASK.search(t)) is not None:
                got = json.loads(found.group(1))
                return got if isinstance(got, dict) else None
    return None


def _text_of(block: dict[str, Any]) -> str:
    c = block.get("content")
    if isinstance(c, str):
        return c
    return "".join(b.get("text", "") for b in c or [] if isinstance(b, dict))
