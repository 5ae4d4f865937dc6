"""Issue 35 in units: the per-event paths read what they need through indexes, never every pending request;
the poster's order with and without a backlog (bot/room/backlog.py)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bot.events.kinds import Kind
from bot.events.states import State, Via
from bot.inbox.record import Record, Settlement
from bot.inbox.sessions import HOOK_KEY_PREFIX
from bot.inbox.store import Inbox
from bot.inbox.submission import parse_submission
from bot.room import backlog
from tests.support.station import request_body


def rec(i: int) -> Record:
    return Record(
        id=f"s:{i}", session_id="s", request_seq=i, key=None, label=None, tool_call_id=f"c{i}", title="t",
        tool_kind="execute", tool_name=None, options=[], raw_input=None, locations=[], content=[], params={},
        digest="d", revision=1, state=State.PENDING, requested_at=float(i), expires_at=1e12, prompt_event_id=None,
        prompt_edited=False, outcome=None,
    )


def test_few_waiting_go_oldest_first() -> None:
    oldest = [rec(i) for i in range(backlog.BACKLOG)]
    assert backlog.order(oldest, []) == oldest


def test_a_backlog_alternates_newest_and_oldest_each_once() -> None:
    everything = [rec(i) for i in range(1000)]
    oldest = everything[: backlog.BACKLOG + 1]
    newest = everything[::-1][: backlog.NEWEST]
    got = [r.request_seq for r in backlog.order(oldest, newest)]
    assert got[:4] == [999, 0, 998, 1]  # what arrived last goes first, the backlog drains from its oldest end
    assert len(got) == len(set(got)) == backlog.BACKLOG + 1 + backlog.NEWEST
    small = everything[: backlog.BACKLOG + 2]  # newest and oldest overlap: each once
    assert sorted(r.request_seq for r in backlog.order(small, small[::-1])) == list(range(backlog.BACKLOG + 2))


def test_a_forms_questions_go_one_at_a_time_in_its_order_even_in_a_backlog() -> None:
    """Sent together, the homeserver may put a form's later question above its first; with a backlog the
    newest end would even send the last question first."""
    form = [replace(rec(i), id=f"f:{i}", session_id="f", kind=Kind.QUESTION) for i in (1, 2, 3)]
    flood = [rec(i) for i in range(100, 100 + backlog.BACKLOG + 1)]
    got = backlog.in_form_order(backlog.order(flood, form[::-1]), flood + form)
    assert [r.id for r in got if r.session_id == "f"] == ["f:1"] and len(got) == len(flood) + 1
    assert backlog.in_form_order(form[1:], form) == []  # the first in flight or backing off: the rest wait
    assert backlog.in_form_order(form[1:], form[1:]) == [form[1]]  # the first is in the room: the second goes


async def submit(inbox: Inbox, sid: str, at: float, key: str | None = None) -> Record:
    r, _ = await inbox.submit(parse_submission(request_body(sid, key=key)), at, 600)
    return r


async def test_needing_post_reads_either_end(inbox: Inbox) -> None:
    for i in range(5):
        await submit(inbox, f"s{i}", float(i))
    first = await inbox.needing_post(limit=5)
    await inbox.set_prompt_event(first[0].id, "$p0", 9.0)
    assert [r.session_id for r in await inbox.needing_post(limit=2)] == ["s1", "s2"]
    assert [r.session_id for r in await inbox.needing_post(limit=2, newest=True)] == ["s4", "s3"]


async def test_set_prompt_event_says_whether_it_is_still_pending(inbox: Inbox) -> None:
    a, b = await submit(inbox, "a", 1.0), await submit(inbox, "b", 2.0)
    await inbox.settle(b.id, Settlement(option_id=None, by="api:x", via=Via.CANCEL, now=3.0))
    assert await inbox.set_prompt_event(a.id, "$a", 4.0) is True
    assert await inbox.set_prompt_event(b.id, "$b", 4.0) is False  # settled while its prompt was on its way


async def test_a_prompt_posted_settled_is_its_own_edit(inbox: Inbox) -> None:
    a = await submit(inbox, "a", 1.0)
    await inbox.settle(a.id, Settlement(option_id="allow_once", by="rule", via=Via.RULE, now=2.0))
    await inbox.set_posted_settled(a.id, "$a", 3.0)
    got = await inbox.get(a.id)
    assert got is not None and got.prompt_event_id == "$a" and got.prompt_edited
    assert await inbox.needing_edit() == [] and await inbox.needing_post() == []
    assert await inbox.own_event("$a") == ("settled", a.id)  # it shows the request settled, not pending


async def test_expiry_and_seeding_read_their_own_requests(inbox: Inbox) -> None:
    a, b = await submit(inbox, "a", 1.0), await submit(inbox, "b", 2.0)  # expire at 601 and 602
    assert await inbox.next_expiry() == 601.0 and [r.id for r in await inbox.due(601.5)] == [a.id]
    await inbox.settle(a.id, Settlement(option_id=None, by="x", via=Via.CANCEL, now=3.0))
    assert await inbox.next_expiry() == 602.0 and await inbox.due(601.5) == []
    assert await inbox.needing_seed(posted_before=10.0) == [] and await inbox.next_seed_due() is None
    await inbox.set_prompt_event(b.id, "$b", 5.0)
    assert [r.id for r in await inbox.needing_seed(posted_before=10.0)] == [b.id]
    assert await inbox.needing_seed(posted_before=4.0) == [] and await inbox.next_seed_due() == 5.0
    await inbox.mark_seeded(b.id)
    assert await inbox.needing_seed(posted_before=10.0) == [] and await inbox.next_seed_due() is None


async def test_keycaps_to_clear_by_the_settled_ids(inbox: Inbox) -> None:
    a, b, c = [await submit(inbox, s, float(i)) for i, s in enumerate("abc")]
    for r in (a, b, c):
        await inbox.add_reaction(r.id, "1", f"$r{r.id}")
    for r in (a, b):
        await inbox.settle(r.id, Settlement(option_id=None, by="x", via=Via.CANCEL, now=5.0))
    assert await inbox.reactions_to_clear(request_ids=[a.id, c.id]) == [(a.id, "1", f"$r{a.id}")]
    assert await inbox.reactions_to_clear(request_ids=[]) == []
    assert sorted(await inbox.reactions_to_clear()) == [(a.id, "1", f"$r{a.id}"), (b.id, "1", f"$r{b.id}")]


async def test_a_sessions_pending(inbox: Inbox) -> None:
    hook = await submit(inbox, "h", 1.0, key=HOOK_KEY_PREFIX + "abc")
    await submit(inbox, "h", 2.0, key="proxy-1")
    other = await submit(inbox, "o", 3.0)
    gone = await submit(inbox, "g", 4.0, key=HOOK_KEY_PREFIX + "def")
    await inbox.settle(gone.id, Settlement(option_id=None, by="x", via=Via.CANCEL, now=5.0))
    assert [r.id for r in await inbox.pending()] == [hook.id, "h:2", other.id]
    assert [r.key for r in await inbox.pending_of_session("h")] == [HOOK_KEY_PREFIX + "abc", "proxy-1"]
    assert [r.id for r in await inbox.pending_of_session("o", room="elsewhere")] == []
    assert [r.id for r in await inbox.pending_newest(2)] == [other.id, f"h:{2}"]
    assert await inbox.count_pending_upto(2) == 2 and await inbox.count_pending_upto(10) == 3


def plan(path: Path, sql: str, *args: Any) -> str:
    with sqlite3.connect(path) as db:
        return " ".join(str(r[3]) for r in db.execute("EXPLAIN QUERY PLAN " + sql, args))


async def test_the_backlog_queries_use_their_indexes(tmp_path: Path) -> None:
    inbox = Inbox(tmp_path / "inbox.db")
    await inbox.open()
    await inbox.close()
    path = tmp_path / "inbox.db"
    for newest in (False, True):
        way = " DESC" if newest else ""
        sql = ("SELECT * FROM requests INDEXED BY requests_unposted WHERE prompt_event_id IS NULL AND post_skipped=0"
               f" AND (post_held=0 OR requested_at < ?) ORDER BY requested_at{way}, rowid{way} LIMIT 5")
        assert "USING INDEX requests_unposted" in plan(path, sql, 0.0)
        assert "TEMP B-TREE" not in plan(path, sql, 0.0)  # in the index's order: no sort of the backlog
        # (INDEXED BY, as Inbox.needing_post says on SQLite, is an error when the index cannot serve the query)
    from bot.inbox.schema import PENDING_HOOK

    hook = f"SELECT * FROM requests INDEXED BY requests_pending_hook WHERE {PENDING_HOOK} ORDER BY requested_at, rowid"
    assert "USING INDEX requests_pending_hook" in plan(path, hook)
    assert "requests_state" not in plan(path, "SELECT * FROM requests WHERE session_id=? AND state=?", "s", "pending")
    from bot.inbox.posting import UNSEEDED
    from bot.inbox.requests import PENDING_LIVE

    expiry = f"SELECT MIN(expires_at) FROM requests INDEXED BY requests_expiry WHERE {PENDING_LIVE}"
    assert "requests_expiry" in plan(path, expiry)
    due = (f"SELECT * FROM requests INDEXED BY requests_expiry WHERE {PENDING_LIVE} AND expires_at<=?"
           " ORDER BY expires_at")
    assert "requests_expiry (expires_at<?)" in plan(path, due, 1.0) and "TEMP B-TREE" not in plan(path, due, 1.0)
    seed = (f"SELECT * FROM requests INDEXED BY requests_unseeded WHERE {UNSEEDED} AND COALESCE(posted_at, 0)<=?"
            " ORDER BY requested_at, rowid LIMIT 8")
    assert "requests_unseeded" in plan(path, seed, 1.0) and "TEMP B-TREE" not in plan(path, seed, 1.0)


class Stub:
    """What the hook hold needs of the daemon: its inbox (whose full listing must never be read) and decide."""

    def __init__(self, inbox: Inbox) -> None:
        self.inbox = inbox

    async def decide(self, request_id: str, decision: str, **kw: Any) -> Record:
        got = await self.inbox.settle(request_id, Settlement(option_id=None, by=kw["by"], via=Via.CANCEL,
                                      feedback=kw.get("feedback"), now=9.0))
        assert got is not None
        return got


@pytest.fixture
async def no_full_listing(sqlite_inbox: Inbox, monkeypatch: pytest.MonkeyPatch) -> Inbox:
    async def everything(*_a: Any, **_k: Any) -> list[Record]:
        raise AssertionError("a per-event path read every pending request")

    monkeypatch.setattr(sqlite_inbox, "pending", everything)
    return sqlite_inbox


async def test_the_hooks_start_up_clean_up_reads_only_hook_requests(no_full_listing: Inbox) -> None:
    inbox = no_full_listing
    hook, _ = await inbox.submit(parse_submission(request_body("h", key=HOOK_KEY_PREFIX + "abc")), 1.0, 600,
                                 held_by="gone-daemon")
    kept, _ = await inbox.submit(parse_submission(request_body("p", key="proxy-1")), 2.0, 600)
    orphans = await inbox.orphaned("this-daemon", 10.0)  # an indexed read (requests_held), never every request
    assert [r.id for r in orphans] == [hook.id] and kept.pending


async def test_brief_pages_are_the_records_cut(inbox: Inbox) -> None:

    from bot.inbox.listing import BRIEF

    body = request_body("brief", command="echo \u00e9t\u00e9 \"quoted\"\n\x1b[31m")
    body["label"] = "my-agent"
    await inbox.submit(parse_submission(body), 1.5, 600, room="infra")
    await submit(inbox, "other", 2.0)
    page, nxt = await inbox.pending_brief_json(1)
    assert nxt is not None
    [brief] = json.loads(page)
    full = json.loads((await inbox.pending_json(1))[0])[0]
    assert brief == {k: full[k] for k in BRIEF}
    rest, end = await inbox.pending_brief_json(1, nxt)
    assert [r["session_id"] for r in json.loads(rest)] == ["other"] and end is None
