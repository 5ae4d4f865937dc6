"""A TCP proxy of the tests' own between the bot and Synapse that misbehaves on command.

It runs in a thread of its own (its own event loop), so blocking test code never stalls it.
Modes for new connections: ``pass``, ``reset`` (RST at once), ``stall`` (accepted, never
forwarded). ``drop(pattern, times)`` closes the connection of the next ``times`` requests
whose head contains ``pattern``; ``answer(pattern, times, status, body)`` answers such
requests itself; ``hold(pattern, seconds, times)`` holds such requests that long, then forwards
them (even when their client has gone); ``delay`` holds every client chunk that long; ``cut()``
resets every open connection.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
from dataclasses import dataclass, field


@dataclass
class _Rule:
    pattern: bytes
    times: int
    response: bytes = b""  # answered instead of forwarded; empty: the connection is dropped
    hold: float = 0.0  # when set: forwarded after this many seconds instead


@dataclass
class FaultProxy:
    target_host: str
    target_port: int
    mode: str = "pass"
    delay: float = 0.0
    dropped: int = 0
    held: int = 0  # requests held by a ``hold`` rule so far
    released: int = 0  # of those, forwarded after their hold
    port: int = 0
    _rules: list[_Rule] = field(default_factory=list)
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        ready = threading.Event()

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            server = loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()
            server.close()
            left = asyncio.all_tasks(loop)  # connections still being served: cancelled, not left pending
            for t in left:
                t.cancel()
            if left:
                loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            loop.run_until_complete(server.wait_closed())
            loop.close()

        self._thread = threading.Thread(target=main, name="fault-proxy", daemon=True)
        self._thread.start()
        ready.wait(10)

    def stop(self) -> None:
        if self._loop is not None:
            self.cut()
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread:
                self._thread.join(10)

    def drop(self, pattern: str, times: int) -> None:
        """Close the connection carrying each of the next ``times`` requests that mention ``pattern``."""
        self._rules.append(_Rule(pattern.encode(), times))

    def answer(self, pattern: str, times: int, status: int, body: dict[str, object]) -> None:
        """Answer the next ``times`` requests that mention ``pattern`` with ``status`` and JSON ``body``."""
        data = json.dumps(body).encode()
        head = (f"HTTP/1.1 {status} Injected\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n")
        self._rules.append(_Rule(pattern.encode(), times, head.encode() + data))

    def hold(self, pattern: str, seconds: float, times: int = 1) -> None:
        """Hold each of the next ``times`` requests that mention ``pattern`` ``seconds``, then forward it."""
        self._rules.append(_Rule(pattern.encode(), times, hold=seconds))

    def pending_drops(self) -> int:
        return sum(r.times for r in self._rules if not r.hold)

    def cut(self) -> None:
        """Reset every open connection (a link that just died)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._cut_all)

    def _cut_all(self) -> None:
        for w in list(self._writers):
            _reset(w)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.mode == "reset":
            _reset(writer)
            return
        if self.mode == "stall":
            self._writers.add(writer)
            try:
                await reader.read()  # until the client gives up
            finally:
                self._writers.discard(writer)
                writer.close()
            return
        try:
            up_r, up_w = await asyncio.open_connection(self.target_host, self.target_port)
        except OSError:
            _reset(writer)
            return
        self._writers |= {writer, up_w}
        try:
            await asyncio.gather(self._pipe(reader, up_w, writer, True), self._pipe(up_r, writer, up_w, False))
        finally:
            self._writers -= {writer, up_w}
            for w in (writer, up_w):
                w.close()

    async def _pipe(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, other: asyncio.StreamWriter, upstream: bool
    ) -> None:
        try:
            while data := await src.read(65536):
                if upstream:
                    if (rule := self._matches(data)) is not None and rule.hold:
                        self.held += 1
                        await asyncio.sleep(rule.hold)
                        dst.write(data)
                        await dst.drain()
                        self.released += 1
                        continue
                    if rule is not None:
                        self.dropped += 1
                        _reset(dst)
                        if rule.response:
                            other.write(rule.response)
                            await other.drain()
                            other.close()
                        else:
                            _reset(other)
                        return
                    if self.delay:
                        await asyncio.sleep(self.delay)
                dst.write(data)
                await dst.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            if not dst.is_closing():
                dst.close()

    def _matches(self, data: bytes) -> _Rule | None:
        head = data.split(b"\r\n", 1)[0]
        for r in self._rules:
            if r.times > 0 and r.pattern in head:
                r.times -= 1
                return r
        return None


def _reset(w: asyncio.StreamWriter) -> None:
    """Close with RST rather than FIN."""
    sock = w.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    w.transport.abort()
