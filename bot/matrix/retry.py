"""Calling the homeserver until it answers: network errors are logged and backed off."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

log = structlog.get_logger("matrix")


async def retry(what: str, call: Callable[[], Awaitable[Any]], attempts: int = 0) -> Any:
    """Call until the homeserver answers (network errors back off); ``attempts`` 0 means forever."""
    delay = 0.5
    n = 0
    while True:
        n += 1
        try:
            return await call()
        except (OSError, TimeoutError) as e:
            if attempts and n >= attempts:
                raise
            log.warning("matrix_unreachable", during=what, error=str(e) or type(e).__name__, retry_in=delay)
        except Exception as e:  # aiohttp client errors are not OSErrors
            if type(e).__module__.startswith("aiohttp"):
                if attempts and n >= attempts:
                    raise
                log.warning("matrix_unreachable", during=what, error=str(e) or type(e).__name__, retry_in=delay)
            else:
                raise
        await asyncio.sleep(delay * (0.8 + 0.4 * random.random()))
        delay = min(delay * 2, 30.0)
