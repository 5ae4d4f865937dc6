"""Stdio plumbing: move newline-delimited bytes from a source to a sink, unchanged.

The pump reads large chunks with no line limit. Whole lines are relayed as they arrive;
only lines a :class:`LineFilter` asks to see are split out and shown to it, and a line
the filter handled itself is left out. A line without its newline yet is held until it
completes, up to ``inspect_limit`` bytes; a longer line is passed through uninspected as
it streams, so memory stays bounded whatever the peer sends. A final line without a
newline is relayed as it is at EOF.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Awaitable, Callable
from typing import Protocol

CHUNK = 1 << 20
INSPECT_LIMIT = 64 << 20  # above the ACP SDK's 50 MB line limit
STREAM_LIMIT = 1 << 20
PIECE = 1 << 20  # the most handed to a pipe transport at once


class LineFilter(Protocol):
    """Decides which lines the relay hands over instead of passing them on."""

    def wants(self, data: bytes | bytearray) -> bool:
        """A cheap test: may ``data`` (one or more whole lines) hold a line to inspect?"""

    def inspect(self, line: bytes | bytearray) -> bool:
        """Look at one line (newline included); True relays it unchanged, False drops it."""


class Source(Protocol):
    """Something to read bytes from; ``b""`` means EOF."""

    async def read(self) -> bytes: ...


class Sink:
    """A byte sink with flow control; lines written through it never interleave.

    Data is handed to the pipe in pieces of at most :data:`PIECE` bytes, waiting for the
    reader between pieces, so a long line is never copied whole into a transport buffer.
    A lock keeps each write whole: the relay's :meth:`write` and the proxy's own lines
    (:meth:`send_line`) take turns; while the relay streams an oversize line across several
    writes it holds the lock throughout (:meth:`hold` / :meth:`release`).
    """

    def __init__(
        self,
        write: Callable[[bytes | bytearray | memoryview], None],
        drain: Callable[[], Awaitable[None]],
        close: Callable[[], None],
    ) -> None:
        self._write = write
        self._drain = drain
        self._close = close
        self._lock = asyncio.Lock()
        self._held = False
        self.closed = False

    async def _put(self, data: bytes | bytearray) -> None:
        if self.closed:
            raise ConnectionResetError("sink closed")
        if len(data) <= PIECE:
            self._write(data)
            await self._drain()
            return
        view = memoryview(data)
        for i in range(0, len(view), PIECE):
            if self.closed:
                raise ConnectionResetError("sink closed")
            self._write(view[i : i + PIECE])
            await self._drain()

    async def write(self, data: bytes | bytearray) -> None:
        """Relay ``data`` and wait for the reader to keep up (ConnectionError when it is gone)."""
        if self._held:
            await self._put(data)
        else:
            async with self._lock:
                await self._put(data)

    async def send_line(self, data: bytes) -> None:
        """Write one whole line of our own, never inside a line being streamed."""
        async with self._lock:
            await self._put(data)

    async def hold(self) -> None:
        """Take the lock before streaming a line in pieces."""
        await self._lock.acquire()
        self._held = True

    def release(self) -> None:
        """Give the lock back after the streamed line's newline."""
        if self._held:
            self._held = False
            self._lock.release()

    def close(self) -> None:
        """Close the underlying pipe (EOF for the reader); idempotent."""
        if not self.closed:
            self.closed = True
            try:
                self._close()
            except (OSError, RuntimeError):
                pass


class StreamSource:
    """A :class:`Source` over an asyncio StreamReader."""

    def __init__(self, reader: asyncio.StreamReader, chunk: int = CHUNK) -> None:
        self._reader = reader
        self._chunk = chunk

    async def read(self) -> bytes:
        return await self._reader.read(self._chunk)


class _FileSource:
    """A :class:`Source` over a regular file (which event loops cannot watch)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def read(self) -> bytes:
        return await asyncio.get_running_loop().run_in_executor(None, os.read, self._fd, CHUNK)


class _PipeWriteProtocol(asyncio.Protocol):
    """Flow control for a write pipe: ``drain`` waits while the transport is paused."""

    def __init__(self) -> None:
        self._paused = False
        self._lost = False
        self._waiters: list[asyncio.Future[None]] = []

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._wake()

    def _wake(self) -> None:
        for w in self._waiters:
            if not w.done():
                w.set_result(None)
        self._waiters.clear()

    async def drain(self) -> None:
        while True:
            if self._lost:
                raise BrokenPipeError("the reader closed the pipe")
            if not self._paused:
                return
            w = asyncio.get_running_loop().create_future()
            self._waiters.append(w)
            await w


def stream_writer_sink(writer: asyncio.StreamWriter) -> Sink:
    """A :class:`Sink` over an asyncio StreamWriter (a subprocess's stdin)."""

    def close() -> None:
        if writer.can_write_eof():
            writer.write_eof()
        writer.close()

    return Sink(writer.write, writer.drain, close)


def _pollable(fd: int) -> bool:
    """Whether the event loop can watch ``fd``: pipes, sockets and terminals, not files or /dev/null."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))


async def open_source(fd: int) -> Source:
    """Read ``fd`` (our stdin) without blocking the loop; pipes, sockets, ttys, files, /dev/null."""
    if not _pollable(fd):
        return _FileSource(fd)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=STREAM_LIMIT)
    proto = asyncio.StreamReaderProtocol(reader)
    await loop.connect_read_pipe(lambda: proto, open(fd, "rb", buffering=0, closefd=False))
    return StreamSource(reader)


async def open_sink(fd: int) -> Sink:
    """Write ``fd`` (our stdout) with flow control; files and /dev/null are written directly."""
    if not _pollable(fd):

        def write_all(data: bytes | bytearray | memoryview) -> None:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]

        async def nothing() -> None:
            return None

        return Sink(write_all, nothing, lambda: None)
    loop = asyncio.get_running_loop()
    proto = _PipeWriteProtocol()
    transport, _ = await loop.connect_write_pipe(lambda: proto, open(fd, "wb", buffering=0, closefd=False))
    return Sink(transport.write, proto.drain, transport.close)


async def pump(
    source: Source,
    sink: Sink,
    filt: LineFilter,
    *,
    inspect_limit: int = INSPECT_LIMIT,
    on_oversize: Callable[[int], None] | None = None,
) -> None:
    """Relay ``source`` to ``sink`` until EOF, showing the filter the lines it wants.

    Returns at EOF (the sink is left open); raises what the sink raises when its reader
    is gone.
    """
    pending = bytearray()  # the start of a line whose newline has not come yet
    streaming = False  # inside an oversize line, passing it through uninspected
    while True:
        data = await source.read()
        if not data:
            break
        if streaming:
            nl = data.find(b"\n")
            if nl < 0:
                await sink.write(data)
                continue
            await sink.write(data[: nl + 1])
            sink.release()
            streaming = False
            data = data[nl + 1 :]
            if not data:
                continue
        nl = data.rfind(b"\n")
        if nl >= 0:
            block: bytes | bytearray
            if pending:
                pending += data[: nl + 1]
                block, pending = pending, bytearray()  # no copy of a long line
            else:
                block = data if nl + 1 == len(data) else data[: nl + 1]
            await _relay_lines(block, sink, filt)
            if nl + 1 < len(data):
                pending += data[nl + 1 :]
        else:
            pending += data
        if len(pending) > inspect_limit:
            if on_oversize is not None:
                on_oversize(len(pending))
            await sink.hold()
            streaming = True
            await sink.write(bytes(pending))
            pending.clear()
    if streaming:
        sink.release()
    elif pending:
        # a last line without its newline: inspect it like any other, relay it as it is
        line = bytes(pending)
        if not filt.wants(line) or filt.inspect(line):
            await sink.write(line)


async def _relay_lines(block: bytes | bytearray, sink: Sink, filt: LineFilter) -> None:
    """Relay a block of whole lines, leaving out those the filter handles."""
    if not filt.wants(block):
        await sink.write(block)
        return
    start = 0  # where the current line starts
    keep = 0  # where the run of lines still to relay starts
    end = len(block)
    while start < end:
        nl = block.find(b"\n", start)
        stop = end if nl < 0 else nl + 1
        line = block[start:stop]
        if filt.wants(line) and not filt.inspect(line):
            if keep < start:
                await sink.write(block[keep:start])
            keep = stop
        start = stop
    if keep < end:
        await sink.write(block if keep == 0 else block[keep:])
