"""A scripted model API on loopback for real agents: Anthropic Messages, Google Gemini, and (through
:mod:`tests.support.scripted_model`) OpenAI Responses and Chat Completions.

One turn: the first model call of a turn answers with a shell tool call running the command
the user's prompt names after ``RUN: `` (to the end of that line); once the tool's result (or
refusal) is in the conversation, a short text answer ends the turn. A prompt carrying a ``SCRIPT:``
(:func:`tests.support.scripted_model.scripted`) is played step by step instead (Gemini and the OpenAI
formats; their tool results are kept in ``tool_results`` too). Side calls (titles,
quota checks, routing, next-speaker checks) get a short text. Every request is logged in
``requests`` (method, path, and whether it was answered with the tool call).
``proxy_url`` names a loopback port that refuses every connection (bound, never listening):
agents given it as their HTTP(S) proxy resolve and reach nothing beyond loopback.
"""

from __future__ import annotations

import json
import re
import socket
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.support import scripted_model

RUN = re.compile(r"RUN: ([^\n\"\\]+)")
ASK = re.compile(r"ASK: (\{.*\})")  # the model calls AskUserQuestion with this JSON input
PLAN = re.compile(r"PLAN: ([^\n]+)")  # plan mode: the model enters it, writes its plan, asks to exit
PLAN_FILE = re.compile(r"(/[^\s\"'`\\]*/\.claude/plans/[A-Za-z0-9._-]+\.md)")
WRITE = re.compile(r"WRITE: ([^\s\"\\]+)")  # with PLAN: once the plan is approved, the model writes this file
DONE_TEXT = "Done."


def _command(text: str) -> str | None:
    m = RUN.search(text)
    return m.group(1).strip() if m else None


@dataclass
class ModelApi:
    """The server; ``url`` once started."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    tool_results: list[str] = field(default_factory=list)  # the text of each tool_result the model was sent
    _seen: set[Any] = field(default_factory=set)
    url: str = ""
    proxy_url: str = ""
    _runner: web.AppRunner | None = None
    _refuser: socket.socket | None = None

    async def start(self) -> ModelApi:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/v1/messages/count_tokens", self._count_tokens)
        app.router.add_post("/v1beta/models/{model_action}", self._gemini)
        app.router.add_post("/v1/responses", self._responses)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_route("*", "/{tail:.*}", self._other)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        self._refuser = socket.socket()
        self._refuser.bind(("127.0.0.1", 0))
        self.proxy_url = f"http://127.0.0.1:{self._refuser.getsockname()[1]}"
        return self

    async def close(self) -> None:
        if self._runner:
            await self._runner.cleanup()
        if self._refuser:
            self._refuser.close()

    def _log(self, request: web.Request, answered: str) -> None:
        self.requests.append({"method": request.method, "path": request.path_qs, "answered": answered})

    def _played(self, request: web.Request, turn: scripted_model.Turn) -> dict[str, Any] | None:
        """Keep the scripted turn's new tool results and log the request; the step to answer with."""
        for call_id, text in turn.history:
            if call_id not in self._seen:
                self._seen.add(call_id)
                self.tool_results.append(text)
        step = turn.step
        self._log(request, "side" if step is None else "tool_use" if "text" not in step else "text")
        return step

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        step = self._played(request, scripted_model.responses_turn(await request.json()))
        return await scripted_model.responses_reply(request, step, len(self.requests))

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        step = self._played(request, scripted_model.chat_turn(body))
        return await scripted_model.chat_reply(request, body, step, len(self.requests))

    async def _models(self, request: web.Request) -> web.Response:
        self._log(request, "models")
        return web.json_response({"object": "list", "data": [{"id": "mock-model", "object": "model", "created": 0}]})

    async def _other(self, request: web.Request) -> web.Response:
        self._log(request, "404")
        return web.json_response({"error": {"type": "not_found", "message": "not scripted"}}, status=404)

    # Anthropic -----------------------------------------------------------------------------

    async def _count_tokens(self, request: web.Request) -> web.Response:
        self._log(request, "count")
        return web.json_response({"input_tokens": 10})

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        messages = body.get("messages") or []
        tools = {t.get("name") for t in body.get("tools") or []}
        last = messages[-1] if messages else {}
        last_content = last.get("content")
        has_result = isinstance(last_content, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in last_content
        )
        for m in messages:  # every tool result the model has been sent, once each
            for b in m.get("content") if isinstance(m.get("content"), list) else []:
                if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("tool_use_id") not in self._seen:
                    self._seen.add(b.get("tool_use_id"))
                    self.tool_results.append(_text_of(b))
        call = _next_tool(messages, tools, body, has_result)
        if call is not None:
            name, tool_input = call
            blocks: list[dict[str, Any]] = [
                {"type": "tool_use", "id": f"toolu_{len(self.requests)}", "name": name, "input": {}}
            ]
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(tool_input)}]
            stop = "tool_use"
            self._log(request, "tool_use")
        else:
            blocks = [{"type": "text", "text": ""}]
            deltas = [{"type": "text_delta", "text": DONE_TEXT}]
            stop = "end_turn"
            self._log(request, "text")
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

    # Gemini --------------------------------------------------------------------------------

    async def _gemini(self, request: web.Request) -> web.StreamResponse:
        model, _, action = request.match_info["model_action"].partition(":")
        body = await request.json()
        if action == "countTokens":
            self._log(request, "count")
            return web.json_response({"totalTokens": 10})
        contents = body.get("contents") or []
        decls = {d.get("name") for t in body.get("tools") or [] for d in (t.get("functionDeclarations") or [])}
        cmd = _command(json.dumps(contents[:1]) + json.dumps(contents))
        used = any("functionCall" in p for c in contents for p in c.get("parts") or [])
        turn = scripted_model.gemini_turn(body)
        wants_json = (body.get("generationConfig") or {}).get("responseMimeType") == "application/json"
        if turn.script is not None and not wants_json:
            step = self._played(request, turn)
            parts: list[dict[str, Any]] = [scripted_model.gemini_part(step or {})]
        elif "run_shell_command" in decls and cmd and not used:
            parts = [{"functionCall": {"name": "run_shell_command", "args": {"command": cmd}}}]
            self._log(request, "tool_use")
        else:
            parts = [{"text": _gemini_text(body)}]
            self._log(request, "text")
        chunk = {
            "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
            "modelVersion": model,
        }
        if action != "streamGenerateContent":
            return web.json_response(chunk)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
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
    cmd = _command(json.dumps(messages[:1]))
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


def _gemini_text(body: dict[str, Any]) -> str:
    """A side call asking for JSON (routing, next speaker) gets JSON that ends the turn."""
    cfg = body.get("generationConfig") or {}
    if cfg.get("responseMimeType") == "application/json":
        return json.dumps(
            {
                "reasoning": "done",
                "next_speaker": "user",
                "model_choice": "flash",
                "complexity_reasoning": "simple",
                "complexity_score": 1,
            }
        )
    return DONE_TEXT
