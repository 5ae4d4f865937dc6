"""Keyset pages of the pending list: the store's query, the cursor, the CLI's reading of ``Link``."""

from __future__ import annotations

import json
import time

import pytest

from bot.cli.http import next_link
from bot.inbox import pages
from bot.inbox.record import Settlement
from bot.inbox.store import Inbox
from bot.inbox.submission import parse_submission
from tests.support.station import request_body


async def _fill(ib: Inbox, sid: str, n: int, at: float) -> list[str]:
    ids = []
    for i in range(n):
        rec, _ = await ib.submit(parse_submission(request_body(sid, tool_call_id=f"c{i}")), at, 600)
        ids.append(rec.id)
    return ids


async def _all_pages(ib: Inbox, limit: int, session: str | None = None) -> list[list[str]]:
    out, after = [], None
    while True:
        page, after = await ib.pending_json(limit, after, session)
        out.append([r["id"] for r in json.loads(page)])
        if after is None:
            return out


async def test_pages_cover_every_pending_record_once_in_order_even_with_equal_times(inbox: Inbox) -> None:
    ids = await _fill(inbox, "a", 7, at=1000.0)  # the same requested_at: rowid breaks the tie
    ids += await _fill(inbox, "b", 3, at=999.0)
    want = [r.id for r in await inbox.pending()]
    assert sorted(want) == sorted(ids) and want[:3] == ids[7:]  # oldest first
    got = await _all_pages(inbox, 3)
    assert [len(p) for p in got] == [3, 3, 3, 1]
    assert [i for p in got for i in p] == want
    assert await _all_pages(inbox, 10) == [want]  # exactly one full page: no empty page after it


async def test_a_settled_record_between_pages_neither_stops_nor_repeats_the_listing(inbox: Inbox) -> None:
    ids = await _fill(inbox, "a", 6, at=time.time())
    page, after = await inbox.pending_json(2)
    first = json.loads(page)
    await inbox.settle(first[1]["id"], Settlement(option_id="allow_once", by="x", via="api", now=time.time()))
    await inbox.settle(ids[3], Settlement(option_id="allow_once", by="x", via="api", now=time.time()))
    rest, after = await inbox.pending_json(10, after)
    assert [r["id"] for r in json.loads(rest)] == [ids[2], ids[4], ids[5]] and after is None


async def test_session_pages(inbox: Inbox) -> None:
    a = await _fill(inbox, "a", 3, at=10.0)
    await _fill(inbox, "b", 3, at=10.0)
    assert await _all_pages(inbox, 2, session="a") == [a[:2], a[2:]]


async def test_the_page_query_reads_the_state_index_in_order(sqlite_inbox: Inbox) -> None:
    # SQLite's plan (PostgreSQL's planner picks by table size)
    rows = await sqlite_inbox.database.fetch(
        "EXPLAIN QUERY PLAN SELECT rowid AS _key, * FROM requests WHERE state=$1 AND (requested_at, rowid) > ($2, $3)"
        " ORDER BY requested_at, rowid LIMIT $4", "pending", 0.0, 0, 10)
    plan = " ".join(str(r[3]) for r in rows)
    assert "USING INDEX requests_state" in plan and "TEMP B-TREE" not in plan, plan


def test_cursor_round_trips_and_refuses_what_it_did_not_hand_out() -> None:
    key = (1764553642.123456, 42)
    assert pages.decode(pages.encode(key)) == key
    for bad in ("", "!!", "bm9wZQ", "bmFuLzE", "MS4wLy0x"):  # "nope", "nan/1", "1.0/-1"
        with pytest.raises(pages.BadCursor):
            pages.decode(bad)


@pytest.mark.parametrize("text", ["0", "1001", "-1", "x", "1.5"])
def test_limit_out_of_range_is_refused_with_the_range(text: str) -> None:
    with pytest.raises(ValueError, match="from 1 to 1000"):
        pages.parse_limit(text)


def test_next_link_takes_only_the_path_and_query_of_rel_next() -> None:
    assert next_link(['</permissions?limit=2&cursor=abc>; rel="next"']) == "/permissions?limit=2&cursor=abc"
    assert next_link(['<http://evil.example/permissions?x=1>; rel="next"']) == "/permissions?x=1"
    assert next_link(['</a>; rel="prev", </permissions?c=1>; rel=next']) == "/permissions?c=1"
    assert next_link(['</permissions?c=1>; rel="prev"']) is None and next_link([]) is None


def test_kept_json_is_reused_while_the_row_is_unchanged_and_rebuilt_when_it_changes() -> None:
    kept = pages.JsonKept(max_kept=2)
    built: list[str] = []

    def enc(row: dict[str, object]) -> str:
        built.append(str(row["id"]))
        return json.dumps(row)

    class Row(dict[str, object]):  # a sqlite3.Row: by name, and its values in order
        def __iter__(self):  # type: ignore[override]
            return iter(self.values())

    a, b = Row(id="a", state="pending", v=1), Row(id="b", state="pending", v=1)
    assert json.loads(kept.array([a, b], enc)) == [{"id": "a", "state": "pending", "v": 1},
                                                   {"id": "b", "state": "pending", "v": 1}]
    kept.array([a, b], enc)
    assert built == ["a", "b"]  # the second listing encoded nothing
    b2 = Row(id="b", state="pending", v=2)  # e.g. its prompt was posted
    assert json.loads(kept.array([a, b2], enc))[1]["v"] == 2 and built == ["a", "b", "b"]
    kept.array([Row(id="c", state="pending", v=1)], enc)  # bounded: the oldest kept goes
    kept.array([a], enc)
    assert built[-1] == "a"
