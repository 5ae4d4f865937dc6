"""Outgoing webhooks against the real daemon: signed over a timestamp, a delivery id and the body, retried with
back-off; and the attacks of issue 32: a captured delivery replayed later fails the receiver's check as
docs/webhooks.md writes it (its code is run here), the URL's own credentials never reach the log, and a 307 to
another origin is never followed (a failed attempt, retried, never re-posted there)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.support.serve import serve
from tests.support.station import Station, request_body

pytestmark = pytest.mark.e2e
SECRET = "hook-secret-4e1f"
URL_PASSWORD, URL_TOKEN = "url-pass-9f3a", "url-token-77c1"
REDIRECT_PASSWORD, REDIRECT_TOKEN = "redir-pass-5d2e", "redir-tok-5678"
DOCS = Path(__file__).resolve().parent.parent / "docs" / "webhooks.md"

Verify = Callable[..., bool]


def documented_check() -> Verify:
    """The receiver's ``verify`` exactly as docs/webhooks.md shows it."""
    code = re.search(r"```python\n(.*?)```", DOCS.read_text(), re.S)
    assert code, "docs/webhooks.md has no Python example"
    scope: dict[str, Any] = {}
    exec(code.group(1), scope)  # the project's own documentation, run as a receiver would
    assert scope["TOLERANCE"] == 300
    return scope["verify"]  # type: ignore[no-any-return]


async def test_webhooks_are_signed_retried_replay_proof_and_keep_their_urls_secrets(
    station: Station, sid: str
) -> None:
    verify = documented_check()
    got: list[tuple[str, bytes, dict[str, str]]] = []
    tries: list[tuple[bytes, dict[str, str]]] = []  # every attempt, failed ones too
    attempts: dict[tuple[str, str], int] = {}  # (event, record id) -> deliveries tried
    hits = {"redirect": 0, "stolen": 0}

    async def hook(request: web.Request) -> web.Response:
        # the session's station may still settle another test's request: each delivery fails twice first
        body = await request.read()
        tries.append((body, dict(request.headers)))
        name = request.headers.get("X-Permission-Bot-Event", "")
        key = (name, json.loads(body)["record"]["id"])
        attempts[key] = attempts.get(key, 0) + 1
        if attempts[key] <= 2:
            return web.Response(status=503)
        got.append((name, body, dict(request.headers)))
        return web.Response(status=204)

    async def steal(_request: web.Request) -> web.Response:
        hits["stolen"] += 1
        return web.Response(status=204)

    thief, thief_port = await serve(app_with("/steal", steal))

    async def redirect(_request: web.Request) -> web.Response:
        hits["redirect"] += 1
        raise web.HTTPTemporaryRedirect(f"http://127.0.0.1:{thief_port}/steal")  # 307: the method and body kept

    app = app_with("/hook", hook)
    app.router.add_post("/redirect", redirect)
    runner, port = await serve(app)
    station.extra_config = (
        f'\n[[webhooks]]\nurl = "http://hookuser:{URL_PASSWORD}@127.0.0.1:{port}/hook?token={URL_TOKEN}&v=1"\n'
        f'secret = "{SECRET}"\n'
        f'\n[[webhooks]]\nurl = "http://ru:{REDIRECT_PASSWORD}@127.0.0.1:{port}/redirect?access_token={REDIRECT_TOKEN}"\n'
        f'secret = "{SECRET}"\nevents = ["permission-request"]\nmax_attempts = 2\n'
    )
    station.write_config()
    await station.restart_daemon()
    try:
        _, rec = await station.ahttp("POST", "/permissions", request_body(sid))
        await station.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "approve"})

        def mine() -> list[tuple[str, bytes, dict[str, str]]]:
            return [g for g in got if json.loads(g[1])["record"]["id"] == rec["id"]]

        for _ in range(300):
            if len(mine()) >= 2 and hits["redirect"] >= 2 and "webhook_failed" in station.log_path.read_text():
                break
            await asyncio.sleep(0.1)
        names = [g[0] for g in mine()]
        assert names == ["permission-request", "permission-resolved"], names
        assert attempts[("permission-request", rec["id"])] == attempts[("permission-resolved", rec["id"])] == 3
        for _name, body, headers in mine():
            assert verify(SECRET.encode(), headers, body), headers
            assert json.loads(body)["record"]["id"] == rec["id"]
            same = [h for b, h in tries if b == body]  # the three attempts: one delivery id, each signed afresh
            assert len(same) == 3 and len({h["X-Permission-Bot-Delivery"] for h in same}) == 1
            assert re.fullmatch(r"[0-9a-f]{32}", headers["X-Permission-Bot-Delivery"])
            assert all(verify(SECRET.encode(), h, body) for h in same)
            replayed_too_late(verify, headers, body)
        assert json.loads(mine()[1][1])["record"]["outcome"]["option_id"] == "allow_once"
        assert mine()[0][2]["X-Permission-Bot-Delivery"] != mine()[1][2]["X-Permission-Bot-Delivery"]

        # a 307 to another origin: two failed attempts on the redirecting URL, nothing ever posted to the thief
        await asyncio.sleep(1.0)
        assert hits == {"redirect": 2, "stolen": 0}, hits
        log = station.log_path.read_text(errors="replace")
        failed = [ln for ln in log.splitlines() if "webhook_failed" in ln]
        assert failed and "HTTP 307" in failed[-1] and "redirects are not followed" in failed[-1], failed
        # the URLs' own credentials: never in a line, the URLs shown masked
        for secret in (SECRET, URL_PASSWORD, URL_TOKEN, REDIRECT_PASSWORD, REDIRECT_TOKEN):
            assert secret not in log, secret
        started = next(ln for ln in log.splitlines()[::-1] if "webhooks_started" in ln)
        assert f"hookuser:***@127.0.0.1:{port}/hook?token=***&v=***" in started, started
        assert "ru:***@127.0.0.1" in failed[-1] and "access_token=***" in failed[-1]
    finally:
        station.extra_config = ""
        station.write_config()
        await station.restart_daemon()
        await runner.cleanup()
        await thief.cleanup()


def app_with(path: str, handler: Callable[[web.Request], Any]) -> web.Application:
    app = web.Application()
    app.router.add_post(path, handler)
    return app


def replayed_too_late(verify: Verify, headers: Mapping[str, str], body: bytes) -> None:
    """A captured delivery: good now, refused once older than the tolerance, and no header can be bent to pass."""
    stamp = int(headers["X-Permission-Bot-Timestamp"])
    assert verify(SECRET.encode(), headers, body, now=stamp + 299)
    assert not verify(SECRET.encode(), headers, body, now=stamp + 301)  # replayed six minutes on
    later = stamp + 3600
    fresh = {**headers, "X-Permission-Bot-Timestamp": str(later)}  # the old signature under a new timestamp
    assert not verify(SECRET.encode(), fresh, body, now=later)
    other = {**headers, "X-Permission-Bot-Delivery": "0" * 32}  # under another delivery id (to dodge dedup)
    assert not verify(SECRET.encode(), other, body, now=stamp)
    assert not verify(SECRET.encode(), headers, body.replace(b"allow_once", b"reject_once"), now=stamp)
    assert not verify(b"another secret", headers, body, now=stamp)
