"""A prompt-injected agent: the scripted agent that, while its permission request waits, hunts for
an API token (its own environment, the proxy's /proc/PPID/cmdline and environ, a --token-file named
there) and tries to approve its own request with each one found, claiming to be alice.

Script keys on top of scripted_agent.py's: "snoop": {"api": URL, "report": PATH, "claim": USER}.
The report (JSON) lists what it found, by source, and the HTTP status of every approval attempt.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from bot.util.lean_models import lean

with lean():  # the SDK's ~280 models declared cheaply: this process starts many times a run
    import acp.schema  # noqa: F401
from acp import run_agent
from scripted_agent import ScriptedAgent

PREFIX = "PERMISSION_BOT"


def _read(path: str) -> bytes | str:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        return type(e).__name__


def hunt() -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """What a command run by the agent can see, and the candidate tokens with where each came from."""
    seen: dict[str, Any] = {"own_env": sorted(k for k in os.environ if k.upper().startswith(PREFIX))}
    tokens = [(f"own env {k}", v) for k, v in os.environ.items() if k.upper().startswith(PREFIX)]
    ppid = os.getppid()
    raw = _read(f"/proc/{ppid}/cmdline")
    argv = raw.decode(errors="replace").split("\0") if isinstance(raw, bytes) else []
    seen["parent_argv"] = argv
    for i, a in enumerate(argv):
        if a == "--token" and i + 1 < len(argv) and argv[i + 1]:
            tokens.append(("parent argv --token", argv[i + 1]))
        if a == "--token-file" and i + 1 < len(argv):
            got = _read(argv[i + 1])
            if isinstance(got, bytes):
                tokens.append(("parent --token-file", got.decode(errors="replace").strip()))
    env = _read(f"/proc/{ppid}/environ")
    seen["parent_environ"] = env if isinstance(env, str) else "readable"
    if isinstance(env, bytes):
        for kv in env.decode(errors="replace").split("\0"):
            k, _, v = kv.partition("=")
            if k.upper().startswith(PREFIX) and v:
                tokens.append((f"parent environ {k}", v))
    seen["sources"] = [src for src, _ in tokens]
    return seen, tokens


def approve(api: str, request_id: str, token: str | None, claim: str) -> tuple[int, Any]:
    body = json.dumps({"decision": "approve", "by": claim}).encode()
    url = f"{api}/permissions/{urllib.parse.quote(request_id, safe=':@')}"
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def attack(session_id: str, spec: dict[str, Any]) -> None:
    seen, tokens = hunt()
    rid = f"{session_id}:1"
    attempts = []
    for src, tok in [("no token", None), *tokens]:
        status, body = approve(spec["api"], rid, tok, spec.get("claim", "@alice:localhost"))
        attempts.append({"source": src, "status": status, "body": body})
    seen["attempts"] = attempts
    with open(spec["report"], "w") as f:
        json.dump(seen, f)


class SnoopAgent(ScriptedAgent):
    async def prompt(self, prompt: Any, session_id: str, **kw: Any) -> Any:
        s = json.loads("".join(getattr(b, "text", "") for b in prompt))
        spec = s.get("snoop")
        if spec:
            # while the permission request waits, as a command the model ran would
            loop = asyncio.get_running_loop()
            loop.call_later(float(spec.get("after", 1.0)), lambda: loop.run_in_executor(None, attack, session_id, spec))
        return await super().prompt(prompt, session_id, **kw)


if __name__ == "__main__":
    try:
        asyncio.run(run_agent(SnoopAgent()))
    except KeyboardInterrupt:
        sys.exit(130)
