"""The Matrix side's retries: what counts as transient, and its pace on :mod:`bot.util.backoff`.

Transient: the network (``OSError``, ``TimeoutError``, ``aiohttp.ClientError``, told by
type) and, where a caller says so, the local disk; a refusal for rate (429 ``M_LIMIT_EXCEEDED``) is told by
:func:`retry_after`. Back-off (:class:`MatrixBackoff`) doubles
from 0.5 s to 30 s, with ±20 % jitter, and resets after a success. An outage is two lines
(:class:`bot.util.outage.Outage`): ``matrix_unreachable`` once, with what to check, and
``matrix_reachable`` when it is over; the tries between are debug lines.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import structlog

from bot.inbox.db.errors import STORAGE_ERRORS as STATE_ERRORS
from bot.util.backoff import Backoff
from bot.util.outage import Outage

log = structlog.get_logger("matrix")

NETWORK_ERRORS: tuple[type[BaseException], ...] = (OSError, TimeoutError, aiohttp.ClientError)
STORAGE_ERRORS: tuple[type[BaseException], ...] = STATE_ERRORS  # SQLite or PostgreSQL: bot.inbox.db.errors

LIMITED = ("M_LIMIT_EXCEEDED", "429")  # a homeserver's refusal for rate
FIRST_DELAY = 0.5
MAX_DELAY = 30.0
UNREACHABLE_HINT = "check matrix.homeserver and that the server is up; retrying with back-off until it answers"


def describe(e: BaseException) -> str:
    """``ServerDisconnectedError: Server disconnected`` (the type alone when the text is empty)."""
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def retry_after(r: Any) -> float | None:
    """Seconds until the homeserver allows the next try, when nio's answer ``r`` is a refusal for rate (its
    ``retry_after_ms``, else 5 s); None when it is not one."""
    if str(getattr(r, "status_code", "")) not in LIMITED:
        return None
    ms = getattr(r, "retry_after_ms", None)
    return ms / 1000 if isinstance(ms, int | float) and ms > 0 else 5.0


class MatrixBackoff(Backoff):
    """The Matrix side's pace: ``FIRST_DELAY`` doubling to ``MAX_DELAY``, ±20 % (read when one is made)."""

    def __init__(self) -> None:
        super().__init__(FIRST_DELAY, MAX_DELAY)


async def retry(what: str, call: Callable[[], Awaitable[Any]], attempts: int = 0, hint: str = UNREACHABLE_HINT) -> Any:
    """Call until it returns; network errors back off; ``attempts`` 0 means forever. ``hint`` says what to
    check, once an outage.

    A stop is a cancellation of the caller's task: the sleeps here never hold it up.
    """
    pace = MatrixBackoff()
    outage = Outage(log, "matrix_unreachable", "matrix_reachable", hint=hint, during=what)
    n = 0
    while True:
        n += 1
        try:
            result = await call()
        except NETWORK_ERRORS as e:
            if attempts and n >= attempts:
                raise
            delay = pace.delay()
            outage.failed(describe(e), delay)
        else:
            outage.ok()
            return result
        await asyncio.sleep(delay)
