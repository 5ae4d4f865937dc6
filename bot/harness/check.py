"""`doctor`'s check of each watched harness: found, reachable, and its token taken."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import Protocol

import aiohttp

from bot.config import Config, HarnessConfig
from bot.harness.client import Client, DiscoveryError, HarnessDown, TokenRefused, discover


class Reporter(Protocol):
    def ok(self, what: str) -> None: ...
    def fail(self, what: str, todo: str) -> None: ...


async def _probe(cfg: HarnessConfig, env: Mapping[str, str]) -> tuple[bool, str, str]:
    """(ok, what, what to do)."""
    try:
        ep = discover(cfg, env)
    except DiscoveryError as e:
        return False, f"harness {cfg.name}: {e}", "fix the config, or start the harness so it writes runtime.json"
    async with aiohttp.ClientSession() as s:
        client = Client(s)
        try:
            held = await client.held(ep)
        except (HarnessDown, TokenRefused) as e:
            return False, f"harness {cfg.name}: unreachable at {ep.url} ({e})", "start the harness or fix its url"
        try:
            await client.check_token(ep)
        except TokenRefused as e:
            return False, f"harness {cfg.name}: token refused ({e})", (
                f"set env {cfg.token_env} to the harness's token (or use workspace = its folder)"
            )
        except HarnessDown as e:
            return False, f"harness {cfg.name}: token not checked ({e})", "check the harness's log"
    return True, f"harness {cfg.name}: {ep.url} holds {len(held)} request(s), token accepted", ""


def check_harnesses(cfg: Config, rep: Reporter, env: Mapping[str, str] | None = None) -> None:
    """One line per ``[[harnesses]]`` entry."""
    for h in cfg.harnesses:
        ok, what, todo = asyncio.run(_probe(h, os.environ if env is None else env))
        rep.ok(what) if ok else rep.fail(what, todo)
