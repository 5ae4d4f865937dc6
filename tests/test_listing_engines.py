"""Issue 35, `permissions ls` on PostgreSQL: the brief pages (``GET /permissions?view=brief``) are the same bytes on
SQLite and PostgreSQL for the same records, and a page on PostgreSQL is read in index order and stops at its end,
even on a table the planner has no statistics for (just filled: it once sorted every pending row for each page)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.inbox.db import create
from bot.inbox.db.postgres import PgConnection
from bot.inbox.listing import BRIEF
from bot.inbox.store import Inbox
from bot.inbox.submission import parse_submission
from tests.support.postgres import PgCluster
from tests.support.station import request_body

ODD = "q\"uote\\ back\nline\ttab\x1b[31m\x7f del \u2028 été 😀 \u200f"
RAW_INPUTS: list[Any] = [
    {"command": ODD, "args": ["-x", 1.5, 1e100, 2**52, -0.0, True, None], "env": {"É": {"deep": []}}},
    None,
    "a bare string\nwith a line",
    [1, "two", {"three": 3}],
    {"path": "/tmp/é"},
    {"cmd": "x"},
]


def bodies() -> list[tuple[dict[str, Any], str]]:
    """Submissions (and their rooms) with every kind of text a brief field can hold."""
    out: list[tuple[dict[str, Any], str]] = []
    for i, raw in enumerate(RAW_INPUTS):
        sid = "s-infra" if i == 4 else f"s{i % 2}"
        body = request_body(sid, tool_call_id=f"c{i}", title=ODD if i % 2 else f"Run {i}",
                            kind="read" if i == 3 else "execute")
        body["toolCall"]["rawInput"] = raw
        if i == 0:
            body["label"] = "my-agent"
        if i == 2:
            body["toolCall"]["_meta"] = {"claudeCode": {"toolName": "Bash"}}
        if raw is None:
            del body["toolCall"]["rawInput"]
        out.append((body, "infra" if i == 4 else "default"))
    return out


async def pages(inbox: Inbox, limit: int, **filters: Any) -> list[bytes]:
    got, after = [], None
    while True:
        body, after = await inbox.pending_brief_json(limit, after, **filters)
        got.append(body)
        if after is None:
            return got


async def filled(url: str) -> Inbox:
    inbox = Inbox(create(url))
    await inbox.open()
    for i, (body, room) in enumerate(bodies()):
        await inbox.submit(parse_submission(body), 1_800_000_000.0 + i * 0.0004, 600, room=room)
    return inbox


async def test_brief_pages_are_the_same_bytes_on_both_engines(tmp_path: Path, pg_cluster: PgCluster) -> None:
    lite = await filled(f"sqlite:{tmp_path / 'state' / 'inbox.sqlite3'}")
    pg = await filled(await pg_cluster.create_database())
    try:
        for limit, filters in ((2, {}), (100, {}), (1, {"session": "s1"}), (5, {"room": "infra"})):
            a, b = await pages(lite, limit, **filters), await pages(pg, limit, **filters)
            assert a == b, (limit, filters)
        [everything] = await pages(pg, 100)
        assert everything.isascii() is False and b": " not in everything  # compact, non-ASCII as is
        briefs = json.loads(everything)
        full = json.loads((await pg.pending_json(100))[0])
        assert briefs == [{k: r[k] for k in BRIEF} for r in full]  # each the record, cut
        assert [b["raw_input"] for b in briefs] == RAW_INPUTS
    finally:
        await lite.close()
        await pg.close()


async def test_a_page_on_postgresql_is_read_in_index_order_without_statistics(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox = Inbox(create(pg_url))
    await inbox.open()
    async with inbox.database.transaction() as db:  # a backlog just filled: the planner has no statistics for it
        for i in range(1500):
            sub = parse_submission(request_body(f"bl{i % 50}", tool_call_id=f"c{i}", command=f"make t{i}"))
            await inbox.insert(db, sub, 1_800_000_000.0 + i * 1e-4, 600)
    plans: list[str] = []
    fetch = PgConnection.fetch

    async def explained(self: PgConnection, sql: str, *args: Any) -> Any:
        if "LIMIT" in sql and "FROM requests" in sql:  # the page, planned as it is about to run
            rows = await fetch(self, "EXPLAIN " + sql, *args)
            plans.append("\n".join(r[0] for r in rows))
        return await fetch(self, sql, *args)

    monkeypatch.setattr(PgConnection, "fetch", explained)
    try:
        assert len(await pages(inbox, 1000)) == 2
        assert len(plans) == 2
        for plan in plans:
            assert "Index Scan using requests_state_key" in plan and "Sort" not in plan, plan
        assert len(await inbox.pending(session="bl7")) == 30  # a read in no page: unchanged
    finally:
        await inbox.close()
