"""A scripted OpenAI Responses API on loopback (``POST /v1/responses``, SSE), the model Codex calls.

The user prompt carries the script: ``SCRIPT:<base64 of a JSON list>``, each element one model turn:
``{"tool": NAME, "args": {...}}`` (a function call), ``{"custom": NAME, "input": TEXT}`` (a free-form tool call,
as Codex's ``apply_patch``) or ``{"text": ...}`` (a message). Step N is the one after
N tool results in the conversation; past the script, the model says ``DONE: <the last tool result>``. Every
tool result the model was sent is kept in ``tool_results`` (in full), so a test sees exactly what the model got.
A request without a script (a title, a summary) gets a short text. ``proxy_url`` names a loopback port that
refuses every connection: given as Codex's HTTP(S) proxy, nothing leaves the machine.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import socket
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

SCRIPT = re.compile(r"SCRIPT:([A-Za-z0-9+/=_-]+)")
OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")


def script_prompt(steps: list[dict[str, Any]], text: str = "") -> str:
    """A user prompt that carries ``steps`` for the model."""
    return (text + " " if text else "") + "SCRIPT:" + base64.b64encode(json.dumps(steps).encode()).decode()


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text(c) for c in content)
    if isinstance(content, dict):
        return "\n".join(v for k in ("text", "input_text", "output_text") if isinstance(v := content.get(k), str))
    return ""


def analyse(body: dict[str, Any]) -> tuple[list[dict[str, Any]] | None, list[str]]:
    """The script of the last user message that has one, and the tool results after it."""
    items = body.get("input") or []
    script, at = None, -1
    for i, it in enumerate(items):
        if isinstance(it, dict) and it.get("type", "message") == "message" and it.get("role") == "user":
            m = SCRIPT.search(_text(it.get("content")))
            if m:
                raw = m.group(1) + "=" * (-len(m.group(1)) % 4)
                script, at = json.loads(base64.b64decode(raw.replace("-", "+").replace("_", "/"))), i
    results: list[str] = []
    if script is not None:
        for it in items[at + 1:]:
            if isinstance(it, dict) and it.get("type") in OUTPUTS:
                out = it.get("output")
                results.append(out if isinstance(out, str) else json.dumps(out))
    return script, results


@dataclass
class ResponsesApi:
    """The server; ``url`` (the ``base_url`` for Codex: ends in ``/v1``) once started."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    tool_results: list[str] = field(default_factory=list)
    url: str = ""
    proxy_url: str = ""
    _ids: Any = field(default_factory=lambda: itertools.count(1))
    _runner: web.AppRunner | None = None
    _refuser: socket.socket | None = None

    async def start(self) -> ResponsesApi:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/responses", self._responses)
        app.router.add_get("/v1/models", self._models)
        app.router.add_route("*", "/{tail:.*}", self._other)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}/v1"
        self._refuser = socket.socket()
        self._refuser.bind(("127.0.0.1", 0))
        self.proxy_url = f"http://127.0.0.1:{self._refuser.getsockname()[1]}"
        return self

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._refuser is not None:
            self._refuser.close()

    def _id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids)}"

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [], "models": []})

    async def _other(self, request: web.Request) -> web.Response:
        self.calls.append({"path": request.path, "unhandled": True})
        return web.json_response({"error": {"message": "not found"}}, status=404)

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        script, results = analyse(body)
        if script is None:
            step: dict[str, Any] = {"text": "ok"}
        elif len(results) < len(script):
            step = script[len(results)]
        else:
            step = {"text": "DONE: " + (results[-1] if results else "")}
        if script is not None and results and len(results) > len(self.tool_results):
            self.tool_results[:] = results
        tools = [t.get("name") or t.get("type") for t in body.get("tools") or [] if isinstance(t, dict)]
        self.calls.append({"path": request.path, "results": len(results), "step": step, "tools": tools})
        resp = web.StreamResponse(headers={"content-type": "text/event-stream", "cache-control": "no-cache"})
        await resp.prepare(request)
        rid = self._id("resp")

        async def send(kind: str, data: dict[str, Any]) -> None:
            await resp.write(f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode())

        await send("response.created", {"response": {"id": rid}})
        if "tool" in step:
            item: dict[str, Any] = {"type": "function_call", "id": self._id("fc"), "call_id": self._id("call"),
                                    "name": step["tool"], "arguments": json.dumps(step.get("args", {}))}
        elif "custom" in step:
            item = {"type": "custom_tool_call", "id": self._id("ctc"), "call_id": self._id("call"),
                    "name": step["custom"], "input": step.get("input", "")}
        else:
            item = {"type": "message", "role": "assistant", "id": self._id("msg"),
                    "content": [{"type": "output_text", "text": step["text"]}]}
        await send("response.output_item.done", {"item": item})
        usage = {"input_tokens": 10, "input_tokens_details": None, "output_tokens": 5,
                 "output_tokens_details": None, "total_tokens": 15}
        await send("response.completed", {"response": {"id": rid, "usage": usage}})
        await resp.write_eof()
        return resp
