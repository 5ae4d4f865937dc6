"""Scripted model turns for real agents: OpenAI Responses (Codex, codex-acp), Chat Completions (Qwen Code,
OpenCode, Copilot CLI) and Gemini, each step chosen by a script the user's prompt carries.

The prompt holds ``SCRIPT:<base64 of a JSON list>`` (:func:`scripted` writes one); each element is one model turn:
``{"tool": NAME, "args": {...}}`` a function call, ``{"custom": NAME, "input": "..."}`` a Responses-API freeform
call (Codex's ``apply_patch``), ``{"text": "..."}`` an answer. Step N is the one after N tool results that follow
the last user message holding a script; past the end the model answers ``DONE: <the last tool result>`` (so the
agent shows what the model got), or :data:`DONE_TEXT` when there was none. A request without a script (titles,
summaries, routing) gets :data:`DONE_TEXT`, or JSON when it asks for JSON.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

SCRIPT = re.compile(r"SCRIPT:([A-Za-z0-9+/=_-]+)")
DONE_TEXT = "Done."
SIDE_JSON = {"reasoning": "done", "next_speaker": "user", "model_choice": "flash", "complexity_reasoning": "simple",
             "complexity_score": 1, "ok": True}


def scripted(steps: list[dict[str, Any]], text: str = "Please do this.") -> str:
    """A user prompt carrying ``steps`` for the model."""
    return f"{text} SCRIPT:{base64.b64encode(json.dumps(steps).encode()).decode()}"


RESPONSES_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")


@dataclass
class Turn:
    """What one request's conversation says: the script (None on a side call) and the tool results after it."""

    script: list[dict[str, Any]] | None = None
    results: list[tuple[str, str]] = field(default_factory=list)  # (call id, text) after the script
    history: list[tuple[str, str]] = field(default_factory=list)  # every tool result in the conversation

    @property
    def step(self) -> dict[str, Any] | None:
        if self.script is None:
            return None
        if len(self.results) < len(self.script):
            return self.script[len(self.results)]
        return {"text": "DONE: " + self.results[-1][1] if self.results else DONE_TEXT}


def _script(text: str) -> list[dict[str, Any]] | None:
    m = SCRIPT.search(text)
    if m is None:
        return None
    raw = m.group(1) + "=" * (-len(m.group(1)) % 4)  # also unpadded or URL-safe, as an agent may pass it on
    got = json.loads(base64.b64decode(raw.replace("-", "+").replace("_", "/")))
    return got if isinstance(got, list) else None


def _text(content: Any) -> str:
    """Every text in a message's content, whatever its shape."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text(c) for c in content)
    if isinstance(content, dict):
        return "\n".join(_text(content.get(k)) for k in ("text", "content", "output") if k in content)
    return ""


def _turn(items: list[Any], user: Any, result: Any) -> Turn:
    """``user(item)``: the text of a user message (else None); ``result(i, item)``: a tool result (id, text) or None."""
    turn, start = Turn(), 0
    for i, it in enumerate(items):
        text = user(it)
        if text is not None and (s := _script(text)) is not None:
            turn.script, start = s, i + 1
    found = [(i, r) for i, it in enumerate(items) if (r := result(i, it)) is not None]
    turn.history = [r for _i, r in found]
    if turn.script is not None:
        turn.results = [r for i, r in found if i >= start]
    return turn


def responses_turn(body: dict[str, Any]) -> Turn:
    return _turn(
        body.get("input") or [],
        lambda it: _text(it.get("content")) if it.get("role") == "user" else None,
        lambda _i, it: (str(it.get("call_id")), _text(it.get("output")))
        if it.get("type") in RESPONSES_OUTPUTS else None,
    )


def chat_turn(body: dict[str, Any]) -> Turn:
    return _turn(
        body.get("messages") or [],
        lambda m: _text(m.get("content")) if m.get("role") == "user" else None,
        lambda _i, m: (str(m.get("tool_call_id")), _text(m.get("content"))) if m.get("role") == "tool" else None,
    )


def gemini_turn(body: dict[str, Any]) -> Turn:
    def user(c: dict[str, Any]) -> str | None:
        parts = c.get("parts") or []
        return "\n".join(p.get("text", "") for p in parts) if c.get("role") == "user" else None

    def result(i: int, c: dict[str, Any]) -> tuple[str, str] | None:
        parts = [p["functionResponse"] for p in c.get("parts") or [] if "functionResponse" in p]
        got = [json.dumps(p.get("response")) for p in parts]
        return (f"gemini_{i}", "\n".join(got)) if got else None

    return _turn(body.get("contents") or [], user, result)


def gemini_part(step: dict[str, Any]) -> dict[str, Any]:
    if "tool" in step:
        return {"functionCall": {"name": step["tool"], "args": step.get("args", {})}}
    return {"text": step.get("text", DONE_TEXT)}


async def _sse(request: web.Request, events: list[tuple[str | None, Any]]) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        await resp.write(f"{head}data: {data if isinstance(data, str) else json.dumps(data)}\n\n".encode())
    await resp.write_eof()
    return resp


async def responses_reply(request: web.Request, step: dict[str, Any] | None, n: int) -> web.StreamResponse:
    """The Responses API's SSE for one step (``n`` makes the ids unique)."""
    step = step or {"text": DONE_TEXT}
    if "tool" in step:
        item = {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": step["tool"],
                "arguments": json.dumps(step.get("args", {}))}
    elif "custom" in step:
        item = {"type": "custom_tool_call", "id": f"ctc_{n}", "call_id": f"call_{n}", "name": step["custom"],
                "input": step.get("input", "")}
    else:
        item = {"type": "message", "role": "assistant", "id": f"msg_{n}",
                "content": [{"type": "output_text", "text": step["text"]}]}
    usage = {"input_tokens": 10, "input_tokens_details": None, "output_tokens": 5, "output_tokens_details": None,
             "total_tokens": 15}
    events: list[tuple[str | None, Any]] = [
        ("response.created", {"type": "response.created", "response": {"id": f"resp_{n}"}}),
        ("response.output_item.done", {"type": "response.output_item.done", "item": item}),
        ("response.completed", {"type": "response.completed", "response": {"id": f"resp_{n}", "usage": usage}}),
    ]
    return await _sse(request, events)


async def chat_reply(
    request: web.Request, body: dict[str, Any], step: dict[str, Any] | None, n: int
) -> web.StreamResponse:
    """Chat Completions, streamed or not, for one step; a side call asking for JSON gets JSON."""
    wants_json = (body.get("response_format") or {}).get("type") in ("json_object", "json_schema")
    if step is None or wants_json:
        step = {"text": json.dumps(SIDE_JSON) if wants_json else DONE_TEXT}
    if "tool" in step:
        call = {"id": f"call_{n}", "type": "function",
                "function": {"name": step["tool"], "arguments": json.dumps(step.get("args", {}))}}
        msg: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    else:
        msg, finish = {"role": "assistant", "content": step["text"]}, "stop"
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    base = {"id": f"chatcmpl_{n}", "created": 0, "model": body.get("model", "mock-model")}
    if not body.get("stream"):
        choice = {"index": 0, "message": msg, "finish_reason": finish}
        return web.json_response({**base, "object": "chat.completion", "choices": [choice], "usage": usage})
    if "tool_calls" in msg:
        msg = {**msg, "tool_calls": [{"index": 0, **msg["tool_calls"][0]}]}
    chunk = {**base, "object": "chat.completion.chunk"}
    return await _sse(request, [
        (None, {**chunk, "choices": [{"index": 0, "delta": msg, "finish_reason": None}]}),
        (None, {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
        (None, {**chunk, "choices": [], "usage": usage}),
        (None, "[DONE]"),
    ])
