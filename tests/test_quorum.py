"""Quorum (issue 37): N distinct approvers, tallied in the settlement's own transaction; the rules that ask."""

from __future__ import annotations

import asyncio
import json

import pytest

from bot.events.states import Via
from bot.inbox import ledger
from bot.inbox.db import create
from bot.inbox.quorum import NotCounted, progress, tally
from bot.inbox.record import EXPIRED, Settlement
from bot.inbox.rules import RuleError, decide, parse_rules
from bot.inbox.store import Inbox
from bot.inbox.submission import parse_submission
from tests.support.station import request_body

OPTIONS = [{"optionId": k, "name": k, "kind": k} for k in ("allow_once", "allow_always", "reject_once")]
A, B, C = "@alice:x", "@bob:x", "@carol:x"


def test_tally() -> None:
    one = tally(2, None, [], OPTIONS, "allow_always", A, Via.MATRIX, 1.0)
    assert one.kind == "counted" and one.given == [{"by": A, "at": 1.0, "option_id": "allow_always"}]
    assert tally(2, None, one.given, OPTIONS, "allow_once", A, Via.REACTION, 2.0).kind == "again"
    done = tally(2, None, one.given, OPTIONS, "allow_always", B, Via.MATRIX, 3.0)
    assert (done.kind, done.option_id, done.by) == ("settle", "allow_always", [A, B])
    narrow = tally(2, None, one.given, OPTIONS, "allow_once", B, Via.MATRIX, 3.0)
    assert narrow.option_id == "allow_once"  # one approver's "always" never widens the other's "once"
    no = tally(2, None, one.given, OPTIONS, "reject_once", B, Via.MATRIX, 3.0)
    assert (no.kind, no.option_id, no.by) == ("settle", "reject_once", [B])
    assert tally(2, [A, B], [], OPTIONS, "allow_once", C, Via.MATRIX, 1.0).kind == "refused"
    assert tally(2, [A, B], [], OPTIONS, "reject_once", C, Via.MATRIX, 1.0).kind == "refused"
    assert progress(2, one.given) == f"Needs 2 approvals: 1 of 2: {A}"


def test_a_token_counts_as_its_person_and_one_of_nobody_never_counts() -> None:
    one = tally(2, [A, B], [], OPTIONS, "allow_once", A, Via.MATRIX, 1.0)
    again = tally(2, [A, B], one.given, OPTIONS, "allow_once", "api:alice-cli", Via.API, 2.0, person=A)
    assert again.kind == "again"  # alice's own token: alice again, whichever way she answers
    first = tally(2, [A, B], [], OPTIONS, "allow_once", "api:alice-cli", Via.API, 1.0, person=A)
    assert first.given == [{"by": A, "at": 1.0, "option_id": "allow_once", "token": "api:alice-cli"}]
    assert tally(2, [A, B], first.given, OPTIONS, "allow_once", A, Via.MATRIX, 2.0).kind == "again"
    nobody = tally(2, None, [], OPTIONS, "allow_once", "api:ci", Via.API, 1.0)
    assert nobody.kind == "refused" and "belongs to no person" in nobody.reason
    assert tally(2, None, one.given, OPTIONS, "allow_once", "api:ci", Via.API, 1.0).kind == "refused"
    rejected = tally(2, None, one.given, OPTIONS, "reject_once", "api:ci", Via.API, 1.0)
    assert (rejected.kind, rejected.by) == ("settle", ["api:ci"])  # a reject still rejects: the safe side
    carols = tally(2, [A, B], [], OPTIONS, "reject_once", "api:carol-cli", Via.API, 1.0, person=C)
    assert carols.kind == "refused" and "not one of the people" in carols.reason
    assert tally(2, None, [], OPTIONS, "allow_once", "api:x", Via.MATRIX, 1.0).kind == "counted"  # a room sender


def test_ask_rules() -> None:
    rules = parse_rules([
        {"match": {"command": "git push*"}, "decision": "approve"},
        {"match": {"command": "git push --force*"}, "decision": "ask", "approvals": 2,
         "answerers": {"users": [A, B]}},
        {"match": {"command": "rm *"}, "decision": "deny"},
    ])
    rec = {"raw_input": {"command": "git push --force origin main"}}
    got = decide(rules, rec)
    assert got is not None and got.decision == "ask" and got.approvals == 2  # an approve rule never skips it
    assert decide(rules, {"raw_input": {"command": "git push origin x"}}) is rules[0]
    for bad, why in (
        ({"match": {"kind": "x"}, "decision": "approve", "approvals": 2}, "only ask rules"),
        ({"match": {"kind": "x"}, "decision": "ask", "approvals": 0}, "approvals"),
        ({"match": {"kind": "x"}, "decision": "ask", "answerers": {"users": ["alice"]}}, "users.0: must be a Matrix"),
        ({"match": {"kind": "x"}, "decision": "ask", "answerers": {"people": []}}, "answerers.users: is required"),
    ):
        with pytest.raises(RuleError, match=why):
            parse_rules([bad])


async def _quorum(inbox: Inbox, approvers: list[str] | None = None) -> str:
    rec, _ = await inbox.submit(parse_submission(request_body("q")), 1.0, 60)
    got = await inbox.require(rec.id, 2, approvers)
    assert got is not None and got.approvals_needed == 2
    return rec.id


async def _entries(inbox: Inbox) -> list[dict[str, object]]:
    return [json.loads(x) async for x in ledger.lines(inbox.database)]


async def test_two_approvers_settle_it_and_the_ledger_names_both(inbox: Inbox) -> None:
    rid = await _quorum(inbox)
    heard: list[str] = []
    inbox.on_approved(lambda: heard.append("x"))
    first = await inbox.settle(rid, Settlement(option_id="allow_once", by=A, via=Via.MATRIX, now=2.0))
    assert first is not None and first.pending and [a["by"] for a in first.approvals] == [A] and heard
    again = await inbox.settle(rid, Settlement(option_id="allow_always", by=A, via=Via.REACTION, now=3.0))
    assert again is not None and again.pending and len(again.approvals) == 1
    stored = await inbox.get(rid)
    assert stored is not None and stored.to_api()["approvals"] == {
        "needed": 2, "given": [{"by": A, "at": "1970-01-01T00:00:02.000Z"}]}
    assert [r.id for r in await inbox.needing_progress()] == []  # not posted yet: no prompt to edit
    with pytest.raises(NotCounted, match="belongs to no person"):  # a token of nobody's: refused, nothing kept
        await inbox.settle(rid, Settlement(option_id="allow_once", by="api:ci", via=Via.API, now=3.5))
    with pytest.raises(NotCounted):
        await inbox.settle(rid, Settlement(option_id="allow_once", by="api:ci", via=Via.API, now=3.5))
    done = await inbox.settle(rid, Settlement(option_id="allow_always", by="api:bob-cli", via=Via.API, now=4.0,
                              person=B))
    assert done is not None and done.state == "resolved" and done.outcome is not None
    assert done.outcome.option_id == "allow_once" and done.outcome.answered_by == "api:bob-cli"
    assert [a["by"] for a in done.approvals] == [A, B]
    (e,) = await _entries(inbox)
    assert e["answered_by"] == [A, B] and e["option_id"] == "allow_once"


async def test_one_reject_rejects_and_rules_and_timeouts_are_no_approvals(inbox: Inbox) -> None:
    rid = await _quorum(inbox, [A, B])
    assert (await inbox.settle(rid, Settlement(option_id="allow_once", by=A, via=Via.MATRIX, now=2.0))).pending  # type: ignore[union-attr]
    refused = await inbox.settle(rid, Settlement(option_id="reject_once", by=C, via=Via.MATRIX, now=3.0))
    assert refused is not None and refused.pending  # carol is not one of its answerers: nothing
    no = await inbox.settle(rid, Settlement("reject_once", B, Via.MATRIX, 4.0, feedback="not today"))
    assert no is not None and no.state == "resolved" and no.outcome is not None
    assert no.outcome.option_id == "reject_once" and [a["by"] for a in no.approvals] == [A]
    rid2 = await _quorum(inbox)
    late = await inbox.settle(rid2, Settlement(option_id="reject_once", by="timeout", via=Via.TIMEOUT, now=9.0,
                              state=EXPIRED))
    assert late is not None and late.state == "expired"
    assert [e["answered_by"] for e in await _entries(inbox)] == [[B], []]


async def test_approvals_on_two_daemons_at_once_are_tallied_once_each(pg_url: str) -> None:
    a, b = Inbox(create(pg_url, holder="a")), Inbox(create(pg_url, holder="b"))
    await asyncio.gather(a.open(), b.open())
    try:
        rid = await _quorum(a)
        got = await asyncio.gather(*(
            ib.settle(rid, Settlement(option_id="allow_once", by=who, via=Via.MATRIX, now=2.0))
            for ib, who in ((a, A), (b, B), (a, A), (b, B), (a, C))
        ))
        settled = [r for r in got if r is not None and not r.pending]
        assert len(settled) == 1 and len(settled[0].approvals) == 2
        assert [e["answered_by"] for e in await _entries(b)] == [[str(g["by"]) for g in settled[0].approvals]]
    finally:
        await a.close()
        await b.close()
