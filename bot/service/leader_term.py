"""One term of leadership's Matrix side, and what is left of it once the term is over.

The daemon builds its Matrix side (nio client, station rooms, sync position, outbox, room answers,
checkpoints, escalations) for each term it leads (bot.service.daemon). When the term is over (another
daemon took over while this one was paused or cut off from the database) the supervisor has already
ended its tasks; :func:`discard` then closes the old client and its crypto store handle, and the daemon
builds a fresh side that reads everything again from the database when it is next elected.
:class:`CurrentMatrix` is what ``/metrics`` reads: always the Matrix side of now, never a discarded one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import structlog

from bot.matrix.client import Matrix

log = structlog.get_logger("leader")


class CurrentMatrix:
    """The figures of whichever Matrix side is the daemon's now (bot.service.metrics.MatrixFigures)."""

    def __init__(self, current: Callable[[], Matrix]) -> None:
        self.current = current

    @property
    def sync_lag(self) -> float:
        return self.current().syncer.sync_lag

    @property
    def connected(self) -> bool:
        return self.current().syncer.connected

    @property
    def send_errors(self) -> int:
        return self.current().sender.send_errors

    @property
    def rate_limited(self) -> bool:
        return self.current().rate_limited

    @property
    def rate_refusals(self) -> int:
        return self.current().rate_refusals


async def discard(matrix: Matrix) -> None:
    """Close an old term's Matrix side: its HTTP session (nothing in flight survives) and nio's store."""
    try:
        await matrix.close()
    except Exception as e:  # the old side is dropped either way; the new one opens its own
        log.warning("matrix_close_failed", error=f"{type(e).__name__}: {e}"[:300])
    store: Any = getattr(matrix.client, "store", None)
    if store is not None:
        with contextlib.suppress(Exception):
            store.database.close()
