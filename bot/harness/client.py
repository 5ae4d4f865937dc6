"""Where a watched harness is (seed 002 discovery) and its permission routes over aiohttp.

Discovery: ``url`` from the config with the token in env ``token_env``; else, as seed 002 says,
env ``AGENTPROTO_DAEMON_URL`` with env ``token_env`` (default ``AGENTPROTO_DAEMON_TOKEN``) as a pair,
else ``<workspace>/.agentproto/runtime.json``'s ``url`` and ``token`` as a pair: a URL from one place
is never sent a token from another. It is read again on every attempt, so a harness that restarts
with a new token is picked up. Tokens never reach a log line or ``repr``.
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
TOKEN_PROBE_ID = "permission-bot.token-check.9f3c1e"  # never a real request id: only ever read (GET)


class HarnessDown(Exception):
    """The harness could not be reached or answered with a server error."""


class TokenRefused(Exception):
    """The harness refused the token (or there is none) on a mutating route."""


class DiscoveryError(Exception):
    """Where the harness is cannot be found out: the message names the key or file."""


class NotRunning(HarnessDown):
    """The workspace has no runtime.json: the harness is not running (it removes the file when it stops)."""


@dataclass(frozen=True)
class Endpoint:
    url: str
    token: str | None = field(repr=False)


def _runtime(cfg: HarnessConfig, workspace: str) -> tuple[str, str | None]:
    """(url, token) from ``<workspace>/.agentproto/runtime.json``."""
    path = Path(workspace).expanduser() / ".agentproto" / "runtime.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NotRunning(f"no {path} (the harness is not running)") from None
    except (OSError, ValueError) as e:
        raise DiscoveryError(f"harnesses.{cfg.name}.workspace: cannot read {path}: {type(e).__name__}") from None
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        raise DiscoveryError(f"harnesses.{cfg.name}.workspace: {path} names no url")
    token = data.get("token")
    return data["url"], token if isinstance(token, str) else None


def discover(cfg: HarnessConfig, env: Mapping[str, str]) -> Endpoint:
    """The harness's base URL and the token that goes with it, per seed 002 (never mixed)."""
    env_token = env.get(cfg.token_env) or None
    if cfg.url is not None:
        url, token = cfg.url, env_token
    elif env.get(URL_ENV):
        url, token = env[URL_ENV], env_token  # seed 002: the env pair overrides runtime.json
    elif cfg.workspace is not None:
        url, token = _runtime(cfg, cfg.workspace)
    else:
        raise DiscoveryError(f"harnesses.{cfg.name}.url: required (or workspace, or env {URL_ENV})")
    if not url.startswith(("http://", "https://")):
        raise DiscoveryError(f"harnesses.{cfg.name}.url: must start with http:// or https://")
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
        return await self._authed("POST", ep, harness_id, "POST /permissions/:id", body)

    async def check_token(self, ep: Endpoint) -> int:
        """Check the token with a read that cannot decide anything: an authenticated
        ``GET /permissions/<an id never held>``. TokenRefused on 401/403 (or no token), HarnessDown on
        5xx or no answer; else the status, which :func:`token_taken` reads."""
        return await self._authed("GET", ep, TOKEN_PROBE_ID, "token check")

    async def _authed(self, method: str, ep: Endpoint, harness_id: str, what: str, body: Any = None) -> int:
        """``method /permissions/ID`` with the token (redirects not followed): the status, below 500."""
        if not ep.token:
            raise TokenRefused("no token (set the env named by token_env, or the workspace's runtime.json)")
        url = f"{ep.url}/permissions/{urllib.parse.quote(harness_id, safe='')}"
        try:
            async with self.session.request(
                method, url, json=body, headers=_auth(ep), timeout=TIMEOUT, allow_redirects=False
            ) as r:
                await r.read()
                status = r.status
        except (aiohttp.ClientError, TimeoutError) as e:
            raise HarnessDown(f"{what}: {type(e).__name__}") from None
        if status in (401, 403):
            raise TokenRefused(f"{what}: HTTP {status}")
        if status >= 500:
            raise HarnessDown(f"{what}: HTTP {status}")
        return status


def token_taken(status: int) -> bool:
    """Whether the token check's status means "not refused" (2xx, or 404/405 past the auth check). A harness
    whose reads need no token answers so too: then the first answer delivered proves the token."""
    return 200 <= status < 300 or status in (404, 405)
