"""Stdio plumbing: move newline-delimited bytes from one file descriptor to another, unchanged.

Each direction runs in its own thread with plain blocking ``read``/``write`` calls: that costs a fraction of an event
loop's per-wakeup overhead, gives natural back-pressure (a slow reader stalls the writer, nothing piles up) and works
on any descriptor (pipes, sockets, terminals, files, /dev/null) without changing its flags.

Whole lines are relayed as they arrive; only lines a :class:`LineFilter` asks to see are split out and shown to it,
and a line the filter handled itself is left out. A line without its newline yet is held until it completes, up to
``inspect_limit`` bytes; a longer line is passed through uninspected as it streams, so memory stays bounded whatever
the peer sends. A last line without a newline is relayed as it is at EOF.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import select
import threading
from collections.abc import Callable
from typing import Any, Protocol

CHUNK = 1 << 20
INSPECT_LIMIT = 64 << 20  # above the ACP SDK's 50 MB line limit


class LineFilter(Protocol):
    """Decides which lines the relay hands over instead of passing them on (runs in the relay thread)."""

    def wants(self, data: bytes | bytearray) -> bool:
        """A cheap test: may ``data`` (one or more whole lines) hold a line to inspect?"""

    def inspect(self, line: bytes | bytearray) -> bool:
        """Look at one line (newline included); True relays it unchanged, False drops it."""


def read_fd(fd: int, size: int = CHUNK) -> bytes:
    """Block until ``fd`` has data; ``b""`` at EOF (or when the descriptor fails)."""
    while True:
        try:
            return os.read(fd, size)
        except BlockingIOError:  # someone left the descriptor non-blocking
            select.select([fd], [], [])
        except OSError as e:
            if e.errno in (errno.EIO, errno.EBADF, errno.ECONNRESET):
                return b""
            raise


class FdSink:
    """Blocking writes to a file descriptor, safe from any thread.

    A re-entrant lock keeps every write whole; the relay thread holds it across the pieces of an oversize line
    (:meth:`hold` / :meth:`release`). Raises ConnectionError when the reader is gone or the sink was closed.
    """

    def __init__(self, fd: int, *, owned: bool) -> None:
        self.fd = fd
        self._owned = owned
        self._lock = threading.RLock()
        self.closed = False
        self.written = 0  # bytes written so far: how a waiter tells a slow reader from a stuck one

    def write(self, data: bytes | bytearray | memoryview) -> None:
        with self._lock:
            if self.closed:
                raise ConnectionResetError("sink closed")
            view = memoryview(data)
            while view:
                try:
                    n = os.write(self.fd, view)
                except BlockingIOError:
                    select.select([], [self.fd], [])
                    continue
                view = view[n:]
                self.written += n

    def try_write(self, data: bytes) -> bool:
        """Write ``data`` at once if that cannot block: a line of at most ``PIPE_BUF`` bytes, the sink free
        and its descriptor writable (such a write to a pipe goes whole). False when ``write`` is needed."""
        if len(data) > select.PIPE_BUF or not self._lock.acquire(blocking=False):
            return False
        try:
            if self.closed:
                raise ConnectionResetError("sink closed")
            if not select.select([], [self.fd], [], 0)[1]:
                return False
            n = os.write(self.fd, data)
            self.written += n
            if n < len(data):  # not a pipe after all: the rest the blocking way, still holding the lock
                self.write(data[n:])
            return True
        finally:
            self._lock.release()

    def hold(self) -> None:
        self._lock.acquire()

    def release(self) -> None:
        self._lock.release()

    def close(self) -> None:
        """Close the descriptor if it is ours (EOF for the reader); idempotent. May block on a writer."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            if self._owned:
                with contextlib.suppress(OSError):
                    os.close(self.fd)


class LineRelay:
    """The line logic of one direction: feed it bytes as they come, then :meth:`finish`."""

    def __init__(
        self, sink: FdSink, filt: LineFilter, *, inspect_limit: int = INSPECT_LIMIT,
        on_oversize: Callable[[int], None] | None = None,
    ) -> None:
        self._sink = sink
        self._filt = filt
        self._limit = inspect_limit
        self._on_oversize = on_oversize
        self._pending = bytearray()  # the start of a line whose newline has not come yet
        self._streaming = False  # inside an oversize line, passing it through uninspected

    def feed(self, data: bytes) -> None:
        """Relay what ``data`` completes; keep the unfinished last line."""
        sink = self._sink
        if self._streaming:
            nl = data.find(b"\n")
            if nl < 0:
                sink.write(data)
                return
            sink.write(memoryview(data)[: nl + 1])
            sink.release()
            self._streaming = False
            data = data[nl + 1 :]
            if not data:
                return
        nl = data.rfind(b"\n")
        if nl >= 0:
            block: bytes | bytearray
            if self._pending:
                self._pending += memoryview(data)[: nl + 1]
                block, self._pending = self._pending, bytearray()  # no copy of a long line
            else:
                block = data if nl + 1 == len(data) else data[: nl + 1]
            self._lines(block)
            if nl + 1 < len(data):
                self._pending += memoryview(data)[nl + 1 :]
        else:
            self._pending += data
        if len(self._pending) > self._limit:
            if self._on_oversize is not None:
                self._on_oversize(len(self._pending))
            sink.hold()
            self._streaming = True
            sink.write(self._pending)
            self._pending = bytearray()

    def finish(self) -> None:
        """At EOF: relay a last line that has no newline (inspected like any other)."""
        if self._streaming:
            self._streaming = False
            self._sink.release()
        elif self._pending:
            line, self._pending = self._pending, bytearray()
            self._lines(line)

    def _lines(self, block: bytes | bytearray) -> None:
        """Relay a block of whole lines (or the last line, at EOF), leaving out those the filter handles."""
        filt, sink = self._filt, self._sink
        if not filt.wants(block):
            sink.write(block)
            return
        start = 0  # where the current line starts
        keep = 0  # where the run of lines still to relay starts
        end = len(block)
        view = memoryview(block)
        while start < end:
            nl = block.find(b"\n", start)
            stop = end if nl < 0 else nl + 1
            line = block[start:stop]
            if filt.wants(line):
                if keep < start:  # what came before goes first: the filter may write, or wait, itself
                    sink.write(view[keep:start])
                    keep = start
                if not filt.inspect(line):
                    keep = stop
            start = stop
        if keep < end:
            sink.write(view[keep:])


def relay_thread(
    name: str, read: Callable[[], bytes], relay: LineRelay, loop: asyncio.AbstractEventLoop,
    after: Callable[[], None] | None = None,
) -> asyncio.Future[None]:
    """Run ``relay`` over ``read`` in a daemon thread; the future ends at EOF or with the error.

    ``after`` runs in the thread once the source is done (e.g. to close it).
    """

    def pump() -> None:
        try:
            while data := read():
                relay.feed(data)
            relay.finish()
        finally:
            if after is not None:
                after()

    return _thread(loop, pump, name)


def in_thread(fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
    """Run a blocking call (a write, a close) in a fresh daemon thread; await its result.

    Daemon threads, not an executor: a write stuck on a reader that never reads must not
    keep the process from exiting.
    """
    return _thread(asyncio.get_running_loop(), fn, None, *args)


def _thread(
    loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], name: str | None, *args: Any
) -> asyncio.Future[Any]:
    """``fn(*args)`` in a fresh daemon thread; the future gets its result or its error (any, handed to the loop,
    which decides), unless the loop is gone by then (the process is on its way out)."""
    fut: asyncio.Future[Any] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if not fut.done():
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value)

    def run() -> None:
        try:
            res: tuple[bool, Any] = (True, fn(*args))
        except BaseException as e:
            res = (False, e)
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, *res)

    threading.Thread(target=run, name=name, daemon=True).start()
    return fut
