"""`doctor`'s check of each watched harness: found, reachable, and its token not refused (never a decision sent)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import Protocol

import aiohttp

from bot.config import Config, HarnessConfig
from bot.harness.client import URL_ENV, Client, DiscoveryError, HarnessDown, TokenRefused, discover, token_taken


class Reporter(Protocol):
    def ok(self, what: str) -> None: ...
    def fail(self, what: str, todo: str) -> None: ...


async def _probe(cfg: HarnessConfig, env: Mapping[str, str]) -> tuple[bool, str, str]:
    """(ok, what, what to do)."""
    try:
        ep = discover(cfg, env)
    except DiscoveryError as e:
        return False, f"harness {cfg.name}: {e}", "fix the config"
    except HarnessDown as e:
        return False, f"harness {cfg.name}: unreachable ({e})", "start the harness (it writes runtime.json)"
    async with aiohttp.ClientSession() as s:
        client = Client(s)
        try:
            held = await client.held(ep)
        except (HarnessDown, TokenRefused) as e:
            return False, f"harness {cfg.name}: unreachable at {ep.url} ({e})", "start the harness or fix its url"
        try:
            status = await client.check_token(ep)
        except TokenRefused as e:
            return False, f"harness {cfg.name}: token refused ({e})", _token_todo(cfg, env)
        except HarnessDown as e:
            return False, f"harness {cfg.name}: token not checked ({e})", "check the harness's log"
    token = "token not refused" if token_taken(status) else f"token check inconclusive (HTTP {status})"
    return True, f"harness {cfg.name}: {ep.url} holds {len(held)} request(s), {token}", ""


def _token_todo(cfg: HarnessConfig, env: Mapping[str, str]) -> str:
    if cfg.url is not None:
        return f"set env {cfg.token_env} to the harness's token"
    if env.get(URL_ENV):
        return f"set env {cfg.token_env} to the token of the harness at env {URL_ENV} (or unset both)"
    return "the token in runtime.json was refused: restart the harness so it writes its current token there"


def check_harnesses(cfg: Config, rep: Reporter, env: Mapping[str, str] | None = None) -> None:
    """One line per ``[[harnesses]]`` entry."""
    for h in cfg.harnesses:
        ok, what, todo = asyncio.run(_probe(h, os.environ if env is None else env))
        rep.ok(what) if ok else rep.fail(what, todo)
