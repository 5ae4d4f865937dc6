"""The proxy never spins on a daemon that keeps forgetting its request (issue 12: `dir/sess`
made it re-submit ~800 times in 3 s): each re-submission waits, doubling up to 5 s, jittered."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from tests.agents.session import ClientRun, script
from tests.test_acp_proxy import FakeDaemon, flags


class ForgetfulDaemon(FakeDaemon):
    """Takes every submission, then never knows the id (as an unquoted `dir/sess:1` URL did)."""

    async def get(self, request: web.Request) -> web.Response:
        return web.json_response({"error": "not_found", "reason": request.match_info["id"]}, status=404)


@pytest.fixture
async def forgetful() -> AsyncIterator[ForgetfulDaemon]:
    d = ForgetfulDaemon()
    await d.start()
    yield d
    await d.stop()


async def test_resubmits_back_off_instead_of_looping(forgetful: ForgetfulDaemon, tmp_path: Path) -> None:
    c = await ClientRun.start(script(title="Forgotten"), flags(forgetful), tmp_path)
    try:
        await forgetful.wait_for(lambda: len(forgetful.submissions) >= 1, 30)
        await asyncio.sleep(3.0)
        n = len(forgetful.submissions)
        assert 2 <= n <= 8, n  # 0.2 + 0.4 + 0.8 + 1.6 s of pauses: about 5 in 3 s, never hundreds
        assert c.stderr().count("request_unknown_resubmitting") in (n - 1, n)  # the last may be still pausing
    finally:
        await c.close()
