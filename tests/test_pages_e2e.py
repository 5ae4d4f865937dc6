"""GET /permissions in pages (``limit``, ``cursor``, a ``Link`` rel="next") and ``permissions ls`` reading them."""

from __future__ import annotations

import json
import urllib.parse
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tests.support.station import TOKEN, Station, request_body
from tests.test_permissions_cli import STANDALONE, _env, free_port, run

pytestmark = pytest.mark.e2e


async def _get(station: Station, path: str) -> tuple[int, Any, str | None]:
    async with aiohttp.ClientSession() as s, s.get(
        station.api_url + path, headers={"Authorization": f"Bearer {TOKEN}"}
    ) as r:
        return r.status, await r.json(), r.headers.get("Link")


def _next(link: str | None) -> str | None:
    if link is None:
        return None
    target, _, rel = link.partition(";")
    assert rel.strip() == 'rel="next"', link
    return target.strip().strip("<>")


async def test_pages_follow_the_link_to_the_end_and_the_unpaged_list_stays(station: Station) -> None:
    sid = f"pg_{uuid.uuid4().hex[:8]}"
    ids = []
    for i in range(5):
        rec = await station.post(request_body(sid, tool_call_id=f"c{i}"))
        ids.append(rec["id"])
    st, whole, link = await _get(station, f"/permissions?session={sid}")
    assert st == 200 and [r["id"] for r in whole] == ids and link is None  # as before pagination
    seen: list[list[str]] = []
    path: str | None = f"/permissions?session={sid}&limit=2"
    while path is not None:
        st, page, link = await _get(station, path)
        assert st == 200 and isinstance(page, list), page
        seen.append([r["id"] for r in page])
        path = _next(link)
        if path is not None:
            assert urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)["session"] == [sid]
        if len(seen) == 1:  # one settled between pages: the next page goes on after it
            await station.ahttp("POST", f"/permissions/{ids[2]}", {"decision": "deny"})
    assert seen == [ids[:2], ids[3:]]
    for rid in ids:
        await station.ahttp("POST", f"/permissions/{rid}", {"decision": "deny"})


@pytest.mark.parametrize(("query", "needle"), [
    ("limit=0", "limit"), ("limit=1001", "limit"), ("limit=ten", "limit"), ("cursor=%21%21", "cursor"),
])
async def test_bad_page_parameters_get_422_with_the_reason(station: Station, query: str, needle: str) -> None:
    st, body, _ = await _get(station, f"/permissions?{query}")
    assert st == 422 and body["error"] == "invalid_request" and needle in body["reason"], body


class Paging:
    """A daemon that always answers in pages of two, linking to the next."""

    def __init__(self, n: int) -> None:
        self.recs = [{"id": f"s:{i}", "session_id": "s", "title": "Bash", "tool_name": "Bash", "state": "pending",
                      "options": [], "raw_input": {"command": f"step {i}"}, "requested_at": "2026-01-01T00:00:00Z"}
                     for i in range(n)]
        self.queries: list[dict[str, str]] = []

    async def list(self, req: web.Request) -> web.Response:
        self.queries.append(dict(req.query))
        start = int(req.query.get("cursor", "0"))
        resp = web.json_response(self.recs[start:start + 2])
        if start + 2 < len(self.recs):
            resp.headers["Link"] = f'<http://elsewhere.example/permissions?limit=2&cursor={start + 2}>; rel="next"'
        return resp


@pytest.fixture
async def paging() -> AsyncIterator[tuple[Paging, str]]:
    p = Paging(5)
    app = web.Application()
    app.router.add_get("/permissions", p.list)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    yield p, f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_ls_reads_every_page_and_only_from_its_own_daemon(paging: tuple[Paging, str]) -> None:
    p, url = paging
    r = await run([*STANDALONE, "ls", "--json"], _env(url, TOKEN))
    assert r.rc == 0, r
    assert [x["id"] for x in json.loads(r.out)] == [f"s:{i}" for i in range(5)]
    assert [q.get("cursor") for q in p.queries] == [None, "2", "4"]  # the host in the link was not followed
    assert p.queries[0]["limit"] == "1000"
