"""A stand-in HTTP server of a test's own on loopback."""

from __future__ import annotations

from aiohttp import web

from bot.demo.homeserver import free_port


async def serve(app: web.Application) -> tuple[web.AppRunner, int]:
    """``app`` served on 127.0.0.1 at a free port: its runner (the caller cleans it up) and the port."""
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, port
