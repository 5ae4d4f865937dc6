"""A submission whose answer has not come when its request is cancelled: find the record to cancel.

A ``POST /permissions`` sent but not answered (a slow link, a busy daemon, the proxy stopping just after sending) may
still create the request after the proxy stopped waiting: a live prompt nobody's agent waits for. The submission is
idempotent on (session, key), so the proxy sends the same body again, racing the first: either answer names the
record, new or existing, and the caller cancels it by id and key (the route an agent token may use on the requests it
submitted itself, showing their key; the daemon checks both). The first POST, arriving later, finds the key with the
same body and gets that record back, settled. Nothing is sent again when no attempt can have reached the daemon.
"""

from __future__ import annotations

import asyncio
from typing import Any

from bot.door.daemon_client import DaemonClient, SubmitState

HEAD_START = 0.2  # seconds the POST in flight has to answer before the same body goes again
POLL = 0.05  # seconds between looks at whether an attempt is still in doubt


def discard(task: asyncio.Future[Any]) -> None:
    """Cancel ``task``, or take its exception so it is not reported as never retrieved."""
    if not task.done():
        task.cancel()
    elif not task.cancelled():
        task.exception()


def _record_id(task: asyncio.Future[Any]) -> str | None:
    if task.done() and not task.cancelled() and task.exception() is None:
        return str(task.result()["id"])
    return None


async def record_to_cancel(
    daemon: DaemonClient, in_flight: asyncio.Future[dict[str, Any]], body: dict[str, Any], state: SubmitState,
    deadline: float,
) -> str | None:
    """The id of the daemon's record for ``body``'s key; None when the daemon cannot have it.

    ``in_flight`` is the call that may yet return the record (it is cancelled before this returns).
    Past ``deadline`` (loop time) raises TimeoutError; a refusal of the body sent again, DaemonError.
    """
    loop = asyncio.get_running_loop()
    again: asyncio.Future[dict[str, Any]] | None = None
    again_state = SubmitState()
    try:
        await asyncio.wait({in_flight}, timeout=max(0.0, min(HEAD_START, deadline - loop.time())))
        if (rid := _record_id(in_flight)) is not None:
            return rid
        if not state.in_doubt:
            return None
        again = asyncio.ensure_future(daemon.submit_retrying(body, deadline, again_state))
        waiting: set[asyncio.Future[dict[str, Any]]] = {again} if in_flight.done() else {again, in_flight}
        while waiting:
            left = deadline - loop.time()
            if left <= 0:
                raise TimeoutError("no answer from the daemon in time")
            done, waiting = await asyncio.wait(waiting, timeout=min(POLL, left), return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                if (rid := _record_id(t)) is not None:
                    return rid
            if not (state.in_doubt or again_state.in_doubt):
                return None  # the attempt in doubt was refused before the daemon saw it; none is on its way
        return str(again.result()["id"])  # both failed: raises the second one's error
    finally:
        discard(in_flight)
        if again is not None:
            discard(again)
