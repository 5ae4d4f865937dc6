"""Where a watched harness is (seed 002 discovery) and its permission routes over aiohttp.

Discovery: ``url`` from the config, else ``<workspace>/.agentproto/runtime.json`` (``url``,
``token``), else env ``AGENTPROTO_DAEMON_URL``; the token from env ``token_env`` (default
``AGENTPROTO_DAEMON_TOKEN``), else runtime.json. It is read again on every attempt, so a harness
that restarts with a new token is picked up. Tokens never reach a log line or ``repr``.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from bot.config import HarnessConfig

URL_ENV = "AGENTPROTO_DAEMON_URL"
TIMEOUT = aiohttp.ClientTimeout(total=15)
TOKEN_PROBE_ID = "permission-bot.token-check.9f3c1e"  # never a real request id: POSTing to it checks the token


class HarnessDown(Exception):
    """The harness could not be reached or answered with a server error."""


class TokenRefused(Exception):
    """The harness refused the token (or there is none) on a mutating route."""


class DiscoveryError(Exception):
    """Where the harness is cannot be found out: the message names the key or file."""


@dataclass(frozen=True)
class Endpoint:
    url: str
    token: str | None = field(repr=False)


def discover(cfg: HarnessConfig, env: Mapping[str, str]) -> Endpoint:
    """The harness's base URL and token, per seed 002."""
    url, token = cfg.url, None
    if cfg.workspace is not None:
        path = Path(cfg.workspace).expanduser() / ".agentproto" / "runtime.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise DiscoveryError(f"harnesses.{cfg.name}.workspace: no {path} (is the harness running?)") from None
        except (OSError, ValueError) as e:
            raise DiscoveryError(f"harnesses.{cfg.name}.workspace: cannot read {path}: {type(e).__name__}") from None
        if not isinstance(data, dict) or not isinstance(data.get("url"), str):
            raise DiscoveryError(f"harnesses.{cfg.name}.workspace: {path} names no url")
        url = data["url"]
        token = data.get("token") if isinstance(data.get("token"), str) else None
    if url is None:
        url = env.get(URL_ENV) or None
        if url is None:
            raise DiscoveryError(f"harnesses.{cfg.name}.url: required (or workspace, or env {URL_ENV})")
    if not url.startswith(("http://", "https://")):
        raise DiscoveryError(f"harnesses.{cfg.name}.url: must start with http:// or https://")
    token = env.get(cfg.token_env) or token
    return Endpoint(url=url.rstrip("/"), token=token or None)


def _auth(ep: Endpoint) -> dict[str, str]:
    return {"Authorization": f"Bearer {ep.token}"} if ep.token else {}


class Client:
    """seed 002's ``GET /permissions`` and ``POST /permissions/:id`` for one session."""

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self.session = session

    async def held(self, ep: Endpoint) -> list[Any]:
        """Everything the harness holds, oldest first."""
        try:
            async with self.session.get(f"{ep.url}/permissions", headers=_auth(ep), timeout=TIMEOUT) as r:
                if r.status in (401, 403):
                    raise TokenRefused(f"GET /permissions: HTTP {r.status}")
                if r.status != 200:
                    raise HarnessDown(f"GET /permissions: HTTP {r.status}")
                body = await r.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as e:
            raise HarnessDown(f"GET /permissions: {type(e).__name__}") from None
        if isinstance(body, dict) and isinstance(body.get("permissions"), list):
            body = body["permissions"]
        if not isinstance(body, list):
            raise HarnessDown("GET /permissions: not a JSON list")
        return body

    async def decide(self, ep: Endpoint, harness_id: str, body: dict[str, Any]) -> int:
        """POST a decision; the HTTP status (2xx, 404, 409, other 4xx). TokenRefused / HarnessDown."""
        if not ep.token:
            raise TokenRefused("no token (set the env named by token_env, or the workspace's runtime.json)")
        url = f"{ep.url}/permissions/{urllib.parse.quote(harness_id, safe='')}"
        try:
            async with self.session.post(url, json=body, headers=_auth(ep), timeout=TIMEOUT) as r:
                await r.read()
                status = r.status
        except (aiohttp.ClientError, TimeoutError) as e:
            raise HarnessDown(f"POST /permissions/:id: {type(e).__name__}") from None
        if status in (401, 403):
            raise TokenRefused(f"POST /permissions/:id: HTTP {status}")
        if status >= 500:
            raise HarnessDown(f"POST /permissions/:id: HTTP {status}")
        return status

    async def check_token(self, ep: Endpoint) -> None:
        """TokenRefused unless the token is taken: a decision for an id that is never held gets 404."""
        await self.decide(ep, TOKEN_PROBE_ID, {"decision": "deny"})
