"""The proxy's own logs: bot.util.logs's one style on stderr, one line per event.

stdout belongs to the relayed agent bytes, so nothing here ever touches it. Lines are handed to a background thread
that writes file descriptor 2: an ACP client that never reads our stderr pipe (the SDK's default) cannot stall the
relay; when the backlog is full, lines are dropped and counted instead.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Iterable
from typing import TextIO, cast

from bot.util import logs

_MAX_BACKLOG = 2000


class StderrSink:
    """A write-only text file for loggers, drained to file descriptor 2 by a daemon thread."""

    def __init__(self) -> None:
        self._lines: collections.deque[bytes] = collections.deque()
        self._cv = threading.Condition()
        self._dropped = 0
        self._busy = False
        self._broken = False
        self._thread: threading.Thread | None = None

    def write(self, text: str) -> int:
        """Queue ``text`` (one or more whole lines); drop it when the backlog is full."""
        data = text.encode("utf-8", "replace")
        with self._cv:
            if self._broken:
                return len(text)
            if len(self._lines) >= _MAX_BACKLOG:
                self._dropped += 1
                return len(text)
            self._lines.append(data)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="acp-stderr", daemon=True)
                self._thread.start()
            self._cv.notify()
        return len(text)

    def flush(self) -> None:
        """Nothing to do: the thread writes as soon as it can (see :meth:`drain`)."""

    def drain(self, timeout: float = 1.0) -> None:
        """Wait up to ``timeout`` seconds for queued lines to reach the descriptor."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while (self._lines or self._busy) and not self._broken:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._cv.wait(left)

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._lines:
                    self._busy = False
                    self._cv.notify_all()
                    self._cv.wait()
                data = self._lines.popleft()
                if not self._lines and self._dropped:
                    note = logs.line("warning", "stderr_backlog_full", dropped=self._dropped)
                    self._lines.append(note.encode())
                    self._dropped = 0
                self._busy = True
            try:
                view = memoryview(data)
                while view:
                    n = os.write(2, view)
                    view = view[n:]
            except OSError:
                with self._cv:
                    self._broken = True
                    self._lines.clear()
                    self._busy = False
                    self._cv.notify_all()
                return


_sink = StderrSink()  # its thread starts at the first line


def configure_stderr_logging(secrets: Iterable[str] = ()) -> StderrSink:
    """Send structlog and every library's logging to stderr in the one style (bot.util.logs: key=value, or
    JSON lines with PERMISSION_BOT_LOG_FORMAT=json); return the sink.

    ``secrets`` (e.g. the API token) are masked wherever they appear in an event.
    """
    logs.configure("info", None, secrets, sink=cast(TextIO, _sink))
    return _sink
