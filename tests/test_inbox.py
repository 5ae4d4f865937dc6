"""The durable inbox: numbering, idempotency, exactly-once settling, persistence."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from bot.door.outcomes import result_from_record
from bot.events.states import Via
from bot.inbox import schema
from bot.inbox.posting import needing_edit_sql
from bot.inbox.record import CANCELLED, EXPIRED, PENDING, RESOLVED, Settlement
from bot.inbox.store import Inbox
from bot.inbox.submission import SubmissionError, parse_submission
from tests.support.station import request_body


async def test_seq_counts_per_session_from_one(inbox: Inbox) -> None:
    a1, _ = await inbox.submit(parse_submission(request_body("a")), 100.0, 60)
    a2, _ = await inbox.submit(parse_submission(request_body("a")), 101.0, 60)
    b1, _ = await inbox.submit(parse_submission(request_body("b")), 102.0, 60)
    assert (a1.id, a2.id, b1.id) == ("a:1", "a:2", "b:1")
    assert a1.state == PENDING and a1.expires_at == 160.0


async def test_revision_rises_for_the_same_tool_call(inbox: Inbox) -> None:
    r1, _ = await inbox.submit(parse_submission(request_body("s", tool_call_id="c1")), 1.0, 60)
    r2, _ = await inbox.submit(parse_submission(request_body("s", tool_call_id="c1")), 2.0, 60)
    r3, _ = await inbox.submit(parse_submission(request_body("s", tool_call_id="c2")), 3.0, 60)
    assert (r1.revision, r2.revision, r3.revision) == (1, 2, 1)


async def test_submit_is_idempotent_on_session_and_key(inbox: Inbox) -> None:
    r1, c1 = await inbox.submit(parse_submission(request_body("s", key="k")), 1.0, 60)
    r2, c2 = await inbox.submit(parse_submission(request_body("s", key="k")), 2.0, 60)
    r3, c3 = await inbox.submit(parse_submission(request_body("other", key="k")), 3.0, 60)
    assert c1 and not c2 and c3
    assert r1.id == r2.id == "s:1" and r3.id == "other:1"


async def test_settle_happens_once_whatever_races(inbox: Inbox) -> None:
    rec, _ = await inbox.submit(parse_submission(request_body("s")), 1.0, 60)
    results = await asyncio.gather(
        *(
            inbox.settle(rec.id, Settlement(option_id=oid, by=f"u{i}", via="api", now=2.0 + i))
            for i, oid in enumerate(["allow_once", "reject_once", "allow_always"] * 10)
        )
    )
    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    final = await inbox.get(rec.id)
    assert final is not None and final.state == RESOLVED
    assert final.outcome is not None and final.outcome.option_id == winners[0].outcome.option_id  # type: ignore[union-attr]


async def test_cancel_and_expiry_states(inbox: Inbox) -> None:
    a, _ = await inbox.submit(parse_submission(request_body("s")), 1.0, 10)
    b, _ = await inbox.submit(parse_submission(request_body("s")), 1.0, 10)
    ca = await inbox.settle(a.id, Settlement(option_id=None, by="client", via="cancel", now=2.0))
    eb = await inbox.settle(
        b.id, Settlement(option_id="reject_once", by="timeout", via="timeout", now=11.0, state=EXPIRED)
    )
    assert ca is not None and ca.state == CANCELLED
    assert result_from_record(ca.to_api()) == {"outcome": {"outcome": "cancelled"}}
    assert eb is not None and eb.state == EXPIRED
    assert result_from_record(eb.to_api()) == {"outcome": {"outcome": "selected", "optionId": "reject_once"}}


async def test_everything_survives_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "inbox.sqlite3"
    ib = Inbox(path)
    await ib.open()
    rec, _ = await ib.submit(parse_submission(request_body("s")), 1.0, 60)
    await ib.set_prompt_event(rec.id, "$prompt")
    assert await ib.mark_handled("$ev1", 1.0)
    await ib.set_kv("matrix.next_batch", "s123")
    await ib.close()
    ib2 = Inbox(path)
    await ib2.open()
    again = await ib2.get(rec.id)
    assert again is not None and again.pending and again.prompt_event_id == "$prompt"
    assert not await ib2.mark_handled("$ev1", 2.0)
    assert await ib2.get_kv("matrix.next_batch") == "s123"
    nxt, _ = await ib2.submit(parse_submission(request_body("s")), 3.0, 60)
    assert nxt.id == "s:2"
    await ib2.close()


async def test_a_skipped_post_is_neither_posted_nor_edited_and_keeps_no_event_id(inbox: Inbox) -> None:
    """A rule-settled request with ``prompts.post_rule_settled`` off: one flag, its event id stays None."""
    rec, _ = await inbox.submit(parse_submission(request_body("s")), 1.0, 60)
    await inbox.settle(rec.id, Settlement(option_id="allow_once", by="rule", via="rule", now=2.0))
    await inbox.skip_post(rec.id)
    assert await inbox.needing_post() == [] and await inbox.needing_edit() == []
    got = await inbox.get(rec.id)
    assert got is not None and got.prompt_event_id is None and got.to_api()["prompt_event_id"] is None
    posted, _ = await inbox.submit(parse_submission(request_body("t")), 3.0, 60)
    await inbox.set_prompt_event(posted.id, "$p", 3.0)  # posted before the skip came: kept, and edited
    await inbox.settle(posted.id, Settlement(option_id="allow_once", by="rule", via="rule", now=4.0))
    await inbox.skip_post(posted.id)
    assert [r.id for r in await inbox.needing_edit()] == [posted.id]


async def test_a_request_held_while_its_rules_apply_is_not_posted_until_released(inbox: Inbox) -> None:
    """The poster never sees a new request before the daemon has applied its rules (a rule-settled
    one with ``post_rule_settled`` off is skipped before it could be posted); idempotent resubmits hold
    nothing."""
    body = request_body("s", key="k")
    rec, created = await inbox.submit(parse_submission(body), 1.0, 60, hold_post=True)
    assert created and await inbox.needing_post() == []
    again, created = await inbox.submit(parse_submission(body), 1.5, 60, hold_post=True)
    assert not created and again.id == rec.id
    other, _ = await inbox.submit(parse_submission(request_body("t")), 2.0, 60)
    assert [r.id for r in await inbox.needing_post()] == [other.id]  # only the held one waits
    await inbox.settle(rec.id, Settlement(option_id="allow_once", by="rule", via="rule", now=3.0))
    await inbox.skip_post(rec.id)
    await inbox.release_post(rec.id)
    assert [r.id for r in await inbox.needing_post()] == [other.id]  # skipped: never posted
    held, _ = await inbox.submit(parse_submission(request_body("u")), 4.0, 60, hold_post=True)
    await inbox.release_post(held.id)  # no rule settled it: posted as usual
    assert [r.id for r in await inbox.needing_post()] == [other.id, held.id]


async def test_the_install_id_is_made_once_per_state_folder_and_kept(tmp_path: Path) -> None:
    ids = []
    for _ in range(2):
        ib = Inbox(tmp_path / "inbox.sqlite3")
        await ib.open()
        ids.append(ib.install_id)
        assert await ib.get_kv("install_id") == ib.install_id
        await ib.close()
    other = Inbox(tmp_path / "wiped" / "inbox.sqlite3")
    await other.open()
    await other.close()
    assert len(ids[0]) == 32 and ids[0] == ids[1] and other.install_id != ids[0]


async def test_wait_settled_wakes_on_settle(inbox: Inbox) -> None:
    rec, _ = await inbox.submit(parse_submission(request_body("s")), 1.0, 60)
    waiter = asyncio.create_task(inbox.wait_settled(rec.id, 10))
    await asyncio.sleep(0.05)
    await inbox.settle(rec.id, Settlement(option_id="allow_once", by="a", via="api", feedback="ok", now=2.0))
    got = await asyncio.wait_for(waiter, 2)
    assert got is not None and got.state == RESOLVED
    assert result_from_record(got.to_api()) == {
        "outcome": {"outcome": "selected", "optionId": "allow_once"},
        "_meta": {"feedback": "ok"},
    }


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "sessionId"),
        ({"sessionId": "", "toolCall": {"toolCallId": "x"}, "options": []}, "sessionId"),
        ({"sessionId": "s", "toolCall": {}, "options": []}, "toolCall.toolCallId"),
        ({"sessionId": "s", "toolCall": {"toolCallId": "x"}, "options": []}, "options"),
        (
            {"sessionId": "s", "toolCall": {"toolCallId": "x"}, "options": [{"optionId": "a", "name": "A"}]},
            "options[0].kind",
        ),
        (
            {
                "sessionId": "s",
                "toolCall": {"toolCallId": "x"},
                "options": [{"optionId": "a", "name": "A", "kind": "allow_once"}] * 2,
            },
            "options[1].optionId",
        ),
        (
            {
                "sessionId": "s",
                "toolCall": {"toolCallId": "x"},
                "options": [{"optionId": "x" * 201, "name": "A", "kind": "allow_once"}],
            },
            "options[0].optionId",
        ),
        ({"sessionId": 5, "toolCall": {"toolCallId": "x"}, "options": []}, "sessionId"),
        ([1, 2], "body"),
    ],
)
def test_bad_submissions_name_the_field(body: object, field: str) -> None:
    with pytest.raises(SubmissionError) as e:
        parse_submission(body)
    assert str(e.value).startswith(field + ":")


def test_digest_excludes_our_own_fields() -> None:
    plain = parse_submission(request_body("s"))
    extra = parse_submission(
        {**request_body("s"), "key": "k", "label": "L", "toolCallContext": {"title": "x"}}
    )
    kept = parse_submission({**request_body("s"), "vendor": {"x": 1}})
    assert plain.digest == extra.digest != kept.digest
    assert kept.params["vendor"] == {"x": 1}


def test_sparse_tool_call_completed_from_context() -> None:
    body = {
        "sessionId": "s",
        "toolCall": {"toolCallId": "c1"},
        "options": [{"optionId": "a", "name": "Allow", "kind": "allow_once"}],
        "toolCallContext": {
            "title": "Run ls",
            "kind": "execute",
            "rawInput": {"command": "ls"},
            "locations": [{"path": "/tmp"}],
        },
    }
    sub = parse_submission(body)
    assert (sub.title, sub.tool_kind, sub.raw_input, sub.locations) == (
        "Run ls",
        "execute",
        {"command": "ls"},
        [{"path": "/tmp"}],
    )
    assert sub.params == {k: v for k, v in body.items() if k != "toolCallContext"}


# -- which settled prompts still need their edit: through an index, whatever else the inbox holds
async def _request(inbox: Inbox, session: str, at: float, prompt: str | None, settle: bool) -> str:
    rec, _ = await inbox.submit(parse_submission(request_body(session)), at, 600)
    if prompt is not None:
        await inbox.set_prompt_event(rec.id, prompt, at)
    if settle:
        assert await inbox.settle(rec.id, Settlement(option_id="allow_once", by="@a:x", via=Via.MATRIX, now=at))
    return rec.id


async def test_needing_edit_is_the_posted_settled_unedited_ones_oldest_first(inbox: Inbox) -> None:
    late = await _request(inbox, "s", 5.0, "$late", settle=True)
    early = await _request(inbox, "s", 1.0, "$early", settle=True)
    await _request(inbox, "s", 2.0, "$pending", settle=False)  # still pending: nothing to show yet
    await _request(inbox, "s", 3.0, None, settle=True)  # settled before it was posted: the post shows it
    edited = await _request(inbox, "s", 4.0, "$edited", settle=True)
    await inbox.mark_edited(edited, "$edit")
    assert [r.id for r in await inbox.needing_edit()] == [early, late]


async def test_rule_settled_requests_never_posted_do_not_hide_the_ones_to_edit(inbox: Inbox) -> None:
    """300 requests settled by a rule and never to be posted come first by decision time; a page of 256
    still finds the one prompt really waiting for its edit."""
    for i in range(300):
        rec, _ = await inbox.submit(parse_submission(request_body(f"r{i}")), float(i), 600)
        await inbox.settle(rec.id, Settlement(option_id="allow_once", by="rule", via=Via.RULE, now=float(i)))
        await inbox.skip_post(rec.id)
    real = await _request(inbox, "s", 1000.0, "$real", settle=True)
    assert [r.id for r in await inbox.needing_edit(limit=256)] == [real]


@pytest.mark.parametrize("shown", [None, True, False])
async def test_needing_edit_reads_the_index_not_the_table(tmp_path: Path, shown: bool | None) -> None:
    ib = Inbox(tmp_path / "inbox.sqlite3")  # SQLite's plan (PostgreSQL's planner picks by table size)
    await ib.open()
    await ib.close()
    db = sqlite3.connect(tmp_path / "inbox.sqlite3")
    try:
        sql = "EXPLAIN QUERY PLAN " + needing_edit_sql(shown)
        plan = " ".join(str(r[3]) for r in db.execute(sql, (PENDING, 256)))
    finally:
        db.close()
    assert "requests_unedited" in plan and "SCAN requests" not in plan.replace("USING INDEX", "")


async def test_an_older_folder_gets_the_index(tmp_path: Path) -> None:
    """A state folder at version 8 (before the index) is upgraded and keeps its unedited prompt."""
    path = tmp_path / "inbox.sqlite3"
    ib = Inbox(path)
    await ib.open()
    rid = await _request(ib, "s", 1.0, "$p", settle=True)
    await ib.database.execute("DROP INDEX requests_unedited")
    await ib.database.execute("ALTER TABLE requests DROP COLUMN post_held")  # a later step's
    await ib.database.execute("PRAGMA user_version = 8")
    await ib.database.execute("DROP TABLE schema_versions")  # as an older permission-bot left it
    await ib.close()
    ib = Inbox(path)
    await ib.open()
    try:
        assert [r.id for r in await ib.needing_edit()] == [rid]
    finally:
        await ib.close()
    db = sqlite3.connect(path)
    try:
        assert db.execute("SELECT 1 FROM sqlite_master WHERE name='requests_unedited'").fetchone()
        assert int(db.execute("PRAGMA user_version").fetchone()[0]) == schema.LATEST
    finally:
        db.close()
