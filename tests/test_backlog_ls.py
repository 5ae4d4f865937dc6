"""Issue 35: `permission-bot permissions ls` streams its pages (a fake API with keyset pages), asks the daemon for
brief records for its table, and never cuts an id; the daemon's brief pages (the real daemon and Synapse)."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from tests.support.serve import serve
from tests.support.station import Station, request_body
from tests.test_permissions_cli import Ran, run

STANDALONE = [sys.executable, "-m", "bot.cli.permissions"]
LONG = "s" * 100  # a session id of 100 characters: its ids are longer than any column cap


class Pager:
    """``GET /permissions`` in keyset pages with a ``Link`` to the next, as the daemon answers."""

    def __init__(self, n: int) -> None:
        at = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(time.time() - 90))
        self.records = [
            {"id": f"{LONG if i == 0 else 'p'}:{i + 1}", "session_id": LONG if i == 0 else "p", "label": None,
             "title": "Run it", "tool_kind": "execute", "tool_name": "Bash", "raw_input": {"command": f"make t{i}"},
             "requested_at": at, "room": "default"}
            for i in range(n)
        ]
        self.queries: list[dict[str, str]] = []

    async def list(self, req: web.Request) -> web.Response:
        self.queries.append(dict(req.query))
        limit, start = int(req.query["limit"]), int(req.query.get("cursor", "0"))
        page = self.records[start : start + limit]
        headers = {}
        if start + limit < len(self.records):
            url = req.rel_url.update_query(cursor=str(start + limit))
            headers["Link"] = f'<{url}>; rel="next"'
        return web.json_response(page, headers=headers)


@pytest.fixture
async def pager() -> AsyncIterator[tuple[Pager, str]]:
    p = Pager(2500)
    app = web.Application()
    app.router.add_get("/permissions", p.list)
    runner, port = await serve(app)
    yield p, f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def ls(url: str, *args: str) -> Ran:
    env = {**os.environ, "PERMISSION_BOT_URL": url, "PERMISSION_BOT_TOKEN": "t", "COLUMNS": "100"}
    return await run([*STANDALONE, "ls", *args], env)


async def test_ls_prints_every_page_in_order_with_whole_ids(pager: tuple[Pager, str]) -> None:
    p, url = pager
    r = await ls(url)
    assert r.rc == 0, r
    head, *rows = r.lines
    assert head.split() == ["ID", "SESSION", "TOOL", "AGE", "QUESTION"]
    assert [row.split()[0] for row in rows] == [rec["id"] for rec in p.records]  # 2,500 rows, 3 pages, in order
    assert rows[0].startswith(f"{LONG}:1 ")  # the whole id, never cut to a column
    assert [q.get("cursor") for q in p.queries] == [None, "1000", "2000"]
    assert all(q["view"] == "brief" and q["limit"] == "1000" for q in p.queries)  # the table's fields only


async def test_ls_json_streams_one_array_of_whole_records(pager: tuple[Pager, str]) -> None:
    p, url = pager
    r = await ls(url, "--json")
    assert r.rc == 0, r
    assert json.loads(r.out) == p.records
    assert all("view" not in q for q in p.queries)  # --json prints whole records


@pytest.mark.e2e
async def test_the_daemon_pages_brief_records(station: Station, sid: str) -> None:
    long_sid = (sid + "_" + "x" * 100)[:120]
    ids = []
    for i in range(3):
        rec = await station.post(request_body(long_sid, tool_call_id=f"c{i}"))
        ids.append(rec["id"])
    try:
        st, page = await station.ahttp("GET", f"/permissions?session={long_sid}&view=brief&limit=2")
        assert st == 200 and [r["id"] for r in page] == ids[:2]
        full = await station.ahttp("GET", f"/permissions/{ids[0]}")
        brief: dict[str, Any] = page[0]
        assert brief == {k: full[1][k] for k in brief}, "a brief record is the record, cut"
        assert set(brief) == {"id", "session_id", "label", "title", "tool_kind", "tool_name", "room", "kind",
                              "raw_input", "requested_at"}
        st, bad = await station.ahttp("GET", "/permissions?view=everything")
        assert st == 422 and "view" in bad["reason"]
        got = station.cli("permissions", "ls", "--session", long_sid, env={"COLUMNS": "80"})
        assert got.returncode == 0, got.stderr
        assert [line.split()[0] for line in got.stdout.splitlines()[1:]] == ids  # whole ids, however long
    finally:
        for rid in ids:
            await station.ahttp("POST", f"/permissions/{rid}", {"decision": "deny"})


@pytest.mark.parametrize("raw", [
    {"command": "ls"}, {"command": "  "}, {"command": ["a", "b c"], "args": ["-x"]}, {"command": "make", "args": "all"},
    {"cmd": "x"}, "str", None, {}, [], {"command": "ls", "cwd": "/tmp", "env": {"A": "1"}},
    {"command": "", "args": ["x"]},
])
def test_the_command_line_ls_shows_is_the_prompts(raw: object) -> None:
    from bot.prompts.shown import command_line, shown_input

    assert command_line(raw) == shown_input(raw).command
