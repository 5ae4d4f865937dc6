"""The station's HTTP API, as a test calls it: ``http``/``ahttp`` (any call: its status and body), ``post`` (a new
request, its status checked), ``record`` (a request's record, long-polled or not); the API tokens the station's
config has, and ``request_body`` (a submission as a harness makes it)."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from typing import Any

TOKEN = "test-api-token-5b7e"  # the old single api.token: both roles, as name "api.token"
# named tokens with roles ([[api.tokens]]), beside it
AGENT_TOKEN = ("agent-a", "test-agent-a-token-0c4d1f")
AGENT_B_TOKEN = ("agent-b", "test-agent-b-token-7e2a90")
DECIDER_TOKEN = ("alice-cli", "test-decider-token-3f8b62")


class StationApi:
    """The HTTP calls of a station whose daemon listens on ``api_url``."""

    api_url: str

    def http(
        self,
        method: str,
        path: str,
        body: Any = None,
        token: str | None = TOKEN,
        raw: bytes | None = None,
        timeout: float = 70,
    ) -> tuple[int, Any]:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.api_url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                txt = r.read()
                return r.status, (json.loads(txt) if txt.strip() else None)
        except urllib.error.HTTPError as e:
            txt = e.read()
            try:
                return e.code, json.loads(txt)
            except ValueError:
                return e.code, txt.decode(errors="replace")

    async def ahttp(self, method: str, path: str, body: Any = None, **kw: Any) -> tuple[int, Any]:
        return await asyncio.to_thread(self.http, method, path, body, **kw)

    async def post(self, body: dict[str, Any], *, token: str | None = TOKEN, want: int = 201) -> dict[str, Any]:
        """POST /permissions as ``token``, the answer's status ``want`` (201: a new request); its body."""
        code, rec = await self.ahttp("POST", "/permissions", body, token=token)
        assert code == want, (code, rec)
        return dict(rec)

    async def record(self, rid: str, wait: float | None = 15, *, token: str | None = TOKEN) -> dict[str, Any]:
        """The request's record, once no longer pending (or after ``wait`` seconds; None: at once, no ``?wait=``)."""
        path = f"/permissions/{rid}" if wait is None else f"/permissions/{rid}?wait={wait}"
        code, rec = await self.ahttp("GET", path, token=token)
        assert code == 200, (code, rec)
        return dict(rec)


def request_body(
    session_id: str,
    *,
    title: str = "Run the test suite",
    command: str = "bun test",
    kind: str = "execute",
    options: list[tuple[str, str, str]] | None = None,
    tool_call_id: str = "call_1",
    key: str | None = None,
) -> dict[str, Any]:
    """An ACP session/request_permission params object, as a harness would submit it."""
    opts = options or [
        ("allow_once", "Allow once", "allow_once"),
        ("allow_always", "Always allow", "allow_always"),
        ("reject_once", "Reject", "reject_once"),
        ("reject_always", "Never allow", "reject_always"),
    ]
    body: dict[str, Any] = {
        "sessionId": session_id,
        "toolCall": {
            "toolCallId": tool_call_id,
            "title": title,
            "kind": kind,
            "rawInput": {"command": command},
            "locations": [{"path": "apps/hub"}],
        },
        "options": [{"optionId": o, "name": n, "kind": k} for o, n, k in opts],
    }
    if key:
        body["key"] = key
    return body
