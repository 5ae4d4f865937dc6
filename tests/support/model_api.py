"""A scripted model API on loopback for real agents: Anthropic Messages (through
:mod:`tests.support.claude_model`), Google Gemini, and (through :mod:`tests.support.scripted_model`) OpenAI
Responses and Chat Completions; the one model stand-in for every agent, Codex's app-server included.

One turn: the first model call of a turn answers with a shell tool call running the command
the user's prompt names after ``RUN: `` (to the end of that line); once the tool's result (or
refusal) is in the conversation, a short text answer ends the turn. A prompt carrying a ``SCRIPT:``
(:func:`tests.support.scripted_model.scripted`) is played step by step instead (Gemini and the OpenAI
formats). Every tool result the model was sent is kept in ``tool_results`` (in full, once each). Side calls
(titles, quota checks, routing, next-speaker checks) get a short text. Every request is logged in
``requests`` (method, path, and whether it was answered with the tool call). ``url`` has no ``/v1``: OpenAI
clients take ``url + "/v1"``. ``proxy_url`` names a loopback port that refuses every connection (bound, never
listening): agents given it as their HTTP(S) proxy resolve and reach nothing beyond loopback.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.support import claude_model, scripted_model

DONE_TEXT = "Done."


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

    def _keep(self, results: list[tuple[Any, str]]) -> None:
        """Keep the tool results (call id, text) not kept yet."""
        for call_id, text in results:
            if call_id not in self._seen:
                self._seen.add(call_id)
                self.tool_results.append(text)

    def _played(self, request: web.Request, turn: scripted_model.Turn) -> dict[str, Any] | None:
        """Keep the scripted turn's new tool results and log the request; the step to answer with."""
        self._keep(turn.history)
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
        data = [{"id": "mock-model", "object": "model", "created": 0}]
        return web.json_response({"object": "list", "data": data, "models": []})  # "models": Codex's own list

    async def _other(self, request: web.Request) -> web.Response:
        self._log(request, "404")
        return web.json_response({"error": {"type": "not_found", "message": "not scripted"}}, status=404)

    # Anthropic -----------------------------------------------------------------------------

    async def _count_tokens(self, request: web.Request) -> web.Response:
        self._log(request, "count")
        return web.json_response({"input_tokens": 10})

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self._keep(claude_model.tool_results(body.get("messages") or []))
        call = claude_model.next_call(body)
        self._log(request, "text" if call is None else "tool_use")
        return await claude_model.messages_reply(request, body, call, len(self.requests) - 1)

    # Gemini --------------------------------------------------------------------------------

    async def _gemini(self, request: web.Request) -> web.StreamResponse:
        model, _, action = request.match_info["model_action"].partition(":")
        body = await request.json()
        if action == "countTokens":
            self._log(request, "count")
            return web.json_response({"totalTokens": 10})
        contents = body.get("contents") or []
        decls = {d.get("name") for t in body.get("tools") or [] for d in (t.get("functionDeclarations") or [])}
        cmd = claude_model.command(json.dumps(contents[:1]) + json.dumps(contents))
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
