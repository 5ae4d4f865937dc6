"""What one retry loop says about an outage (the state's database away, for now): one warning when it
starts, with the reason, and one info line when it is over. The attempts in between are ``debug`` lines,
so a restart of a few seconds reads as two lines per loop, not one per try (and never a traceback)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


class Outage:
    """One loop's outage: :meth:`failed` on each failed try, :meth:`ok` on each success."""

    def __init__(
        self, log: Any, lost: str, back: str, clock: Callable[[], float] = time.monotonic, hint: str = "", **ctx: Any
    ) -> None:
        self.log, self.lost, self.back, self.clock, self.ctx = log, lost, back, clock, ctx
        self.hint = hint  # what to check, on the first warning only
        self.since: float | None = None
        self.tries = 0

    def failed(self, error: BaseException | str, retry_in: float | None = None, event: str | None = None) -> None:
        """A try failed: the warning ``event`` (default ``lost``) the first time, a debug line after."""
        why = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        fields = {**self.ctx, "error": why[:300], **({} if retry_in is None else {"retry_in": round(retry_in, 2)})}
        self.tries += 1
        if self.since is None:
            self.since = self.clock()
            self.log.warning(event or self.lost, **fields, **({"hint": self.hint} if self.hint else {}))
        else:
            self.log.debug(event or self.lost, attempt=self.tries, **fields)

    def ok(self) -> None:
        """A try went through: the info line ``back`` if it ends an outage."""
        if self.since is None:
            return
        self.log.info(self.back, **self.ctx, after_s=round(self.clock() - self.since, 2), attempts=self.tries)
        self.since, self.tries = None, 0
