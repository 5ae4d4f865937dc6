"""A person on matrix-js-sdk with its Rust crypto (the engine under Element), driven through
tests/js/human.mjs over JSON lines. ``npm ci`` runs once when tests/js/node_modules is missing."""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

JS_DIR = Path(__file__).resolve().parent.parent / "js"


def npm_ci() -> None:
    """Install the driver's pinned packages (package-lock.json) unless they are there already."""
    if (JS_DIR / "node_modules" / "matrix-js-sdk").is_dir():
        return
    npm = shutil.which("npm")
    assert npm, "npm is needed for the matrix-js-sdk tests (node 20 + npm)"
    subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=JS_DIR, check=True, capture_output=True)


class JSHuman:
    """One node process holding one or more js-sdk devices (named) of people on the homeserver."""

    def __init__(self) -> None:
        self.proc: asyncio.subprocess.Process | None = None
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await asyncio.to_thread(npm_ci)
        node = shutil.which("node")
        assert node, "node (v20) is needed for the matrix-js-sdk tests"
        self.proc = await asyncio.create_subprocess_exec(
            node, str(JS_DIR / "human.mjs"), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, limit=2**24,
        )
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            fut = self._waiting.pop(msg.get("id"), None)
            if fut is not None and not fut.done():
                fut.set_result(msg)
        for fut in self._waiting.values():
            if not fut.done():
                fut.set_exception(AssertionError("the js-sdk driver exited"))

    async def call(self, cmd: str, timeout: float = 90, **kw: Any) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdin is not None
        i = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[i] = fut
        self.proc.stdin.write((json.dumps({"id": i, "cmd": cmd, **kw}) + "\n").encode())
        await self.proc.stdin.drain()
        msg = await asyncio.wait_for(fut, timeout)
        assert msg.get("ok"), f"js-sdk {cmd}: {msg.get('error')}"
        return msg

    async def close(self) -> None:
        if self.proc is None:
            return
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 10)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        if self._reader is not None:
            await self._reader
