"""What every door's line filters share (they run in the relay threads): the cheap byte test of a line
(:func:`may_matter`), its parse, and a hand-over to the event loop that the relay waits for (:func:`ask_loop`)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
from collections.abc import Coroutine
from typing import Any

import structlog

log = structlog.get_logger("bot.acp")

RESULT_WORD, ERROR_WORD = b'"result"', b'"error"'  # what a line holding a JSON-RPC reply spells


def may_matter(data: bytes | bytearray, words: tuple[bytes, ...]) -> bool:
    """False only when no line in ``data`` can spell one of ``words``: no backslash and no word."""
    return b"\\" in data or any(w in data for w in words)


def parse(line: bytes | bytearray) -> Any:
    """The line's JSON value, or None when it is not JSON."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


def is_request(msg: dict[str, Any]) -> bool:
    """A JSON-RPC request: an id, a params object, no result or error."""
    return "id" in msg and isinstance(msg.get("params"), dict) and "result" not in msg and "error" not in msg


def ask_loop(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], timeout: float, what: str) -> Any:
    """Run ``coro`` on the loop and block this relay thread on it, at most ``timeout`` seconds.

    Its result, or None when none came (the loop gone, too slow, or the handler failed).
    """
    try:
        fut = asyncio.run_coroutine_threadsafe(coro, loop)
    except RuntimeError:  # the loop is closed: the proxy is on its way out
        coro.close()
        return None
    try:
        return fut.result(timeout=timeout)
    except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
        log.warning("line_handler_timed_out", message="no answer from the proxy in time", what=what)
    except Exception as e:  # the handler failed: relay the line as it is
        log.warning("line_handler_failed", message="relaying the line unchanged", what=what, error=repr(e))
    return None
