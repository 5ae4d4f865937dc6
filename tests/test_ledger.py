"""The ledger: its chain (pure), and its entries appended in the settlement's own transaction on SQLite and
PostgreSQL, one chain whatever races."""

from __future__ import annotations

import asyncio
import hashlib
import json

import pytest

from bot.events.ledger import ZERO, Checker, against_checkpoints, canonical, entry_hash, line, seal
from bot.events.states import Via
from bot.inbox import ledger
from bot.inbox.db import create
from bot.inbox.record import EXPIRED, Settlement
from bot.inbox.store import Inbox
from bot.inbox.submission import parse_submission
from tests.support.station import request_body


def test_canonical_json_is_rfc8785() -> None:
    assert canonical({"b": [1, "x"], "a": None, "c": True}) == '{"a":null,"b":[1,"x"],"c":true}'
    assert canonical({"\u20ac": 1, "\U0001f600": 2, "\ufb01": 3}) == '{"\u20ac":1,"\U0001f600":2,"\ufb01":3}'
    assert canonical("\u0007\n\"\\é") == '"\\u0007\\n\\"\\\\é"'
    assert canonical({"a": 1.5, "b": 1e21}) == '{"a":1.5,"b":1e+21}'


def test_the_fast_path_writes_what_rfc8785_writes() -> None:
    e = seal({"at": "x", "request_id": "s:1", "answered_by": ["@a:x", "é\u2028\u0001\"\\"], "feedback": "ok\n€𝄞",
              "revision": 3, "option_id": None, "digest": "sha256:ab"}, 7, ZERO)
    assert line(e) == canonical(e)
    body = {k: v for k, v in e.items() if k != "hash"}
    assert e["hash"] == hashlib.sha256(canonical(body).encode()).hexdigest()


def test_the_hash_is_sha256_of_the_canonical_entry_without_hash() -> None:
    e = seal({"at": "2026-01-01T00:00:00.000Z", "request_id": "s:1", "answered_by": ["@a:x"]}, 1, ZERO)
    body = {k: v for k, v in e.items() if k != "hash"}
    assert e["hash"] == hashlib.sha256(canonical(body).encode()).hexdigest() == entry_hash(e)
    assert json.loads(line(e)) == e and line(e) == canonical(e)


def _chain(n: int) -> list[dict[str, object]]:
    out, prev = [], ZERO
    for i in range(1, n + 1):
        e = seal({"request_id": f"s:{i}", "answered_by": [], "via": "timeout"}, i, prev)
        out.append(e)
        prev = str(e["hash"])
    return out


def _check(entries: list[dict[str, object]], from_start: bool = True) -> Checker:
    c = Checker(from_start=from_start)
    for e in entries:
        if not c.feed(e):
            break
    return c


def test_checker_names_the_first_bad_or_missing_seq() -> None:
    good = _chain(5)
    assert _check(good).problem is None and _check(good).last_seq == 5
    changed = [dict(e) for e in good]
    changed[2]["via"] = "api"
    assert _check(changed).bad_seq == 3
    assert _check(good[:1] + good[2:]).bad_seq == 2  # deleted
    rehashed = [dict(e) for e in good]
    rehashed[1]["via"] = "api"
    rehashed[1]["hash"] = entry_hash(rehashed[1])  # its hash recomputed: the next entry's prev tells
    assert _check(rehashed).bad_seq == 3
    assert _check(good[1:]).bad_seq == 1  # a chain must start at 1
    assert _check(good[2:], from_start=False).problem is None  # an export --since starts where it starts


def test_checkpoints_catch_a_chain_recomputed_from_some_point() -> None:
    good = _chain(6)
    forged, prev = good[:3], str(good[2]["hash"])
    for e in good[3:]:
        f = seal({**e, "via": "api"}, int(e["seq"]), prev)  # type: ignore[call-overload]
        forged.append(f)
        prev = str(f["hash"])
    cps = [("default", 2, str(good[1]["hash"])), ("infra", 5, str(good[4]["hash"]))]
    c = Checker(wanted={2, 5})
    for e in forged:
        assert c.feed(e)
    assert c.problem is None  # internally consistent
    why = against_checkpoints(c, cps)
    assert why is not None and why.startswith("seq 5:")
    c = Checker(wanted={2, 5})
    for e in good[:4]:  # the last two deleted
        c.feed(e)
    why = against_checkpoints(c, cps)
    assert why is not None and why.startswith("seq 5: missing")


async def _entries(ib: Inbox) -> list[dict[str, object]]:
    return [json.loads(x) async for x in ledger.lines(ib.database)]


async def test_every_settlement_is_appended_in_its_transaction(inbox: Inbox) -> None:
    recs = [(await inbox.submit(parse_submission(request_body("s")), 1.0, 60))[0] for _ in range(4)]
    await inbox.settle(recs[0].id, Settlement("allow_once", "@a:x", Via.MATRIX, 2.0, feedback="ok"))
    await inbox.settle(recs[1].id, Settlement(option_id="reject_once", by="api:ci", via=Via.API, now=3.0))
    await inbox.settle(recs[2].id, Settlement(option_id=None, by="api:agent", via=Via.CANCEL, now=4.0))
    await inbox.settle(recs[3].id, Settlement(option_id="allow_always", by="rule", via=Via.RULE, now=5.0,
                       ledger_by=["rule:2"]))
    assert await inbox.settle(recs[0].id, Settlement(option_id="allow_once", by="@b:x", via=Via.MATRIX,
                              now=6.0)) is None  # not pending: no entry
    got = await _entries(inbox)
    assert [e["seq"] for e in got] == [1, 2, 3, 4] and got[0]["prev"] == ZERO
    assert [(e["answered_by"], e["meaning"], e["scope"], e["via"]) for e in got] == [
        (["@a:x"], "approve", "once", "matrix"), (["api:ci"], "reject", "once", "api"),
        ([], None, None, "cancel"), (["rule:2"], "approve", "always", "rule"),
    ]
    assert got[0]["at"] == "1970-01-01T00:00:02.000Z" and got[0]["feedback"] == "ok"
    assert got[0]["digest"] == recs[0].digest and got[0]["revision"] == 1 and got[0]["kind"] == "permission"
    c = _check(got)
    assert c.problem is None and await ledger.head(inbox.database) == (4, got[-1]["hash"])
    assert [json.loads(x)["seq"] async for x in ledger.lines(inbox.database, since=4.0, page=1)] == [3, 4]
    assert [x async for x in ledger.lines(inbox.database, rooms=["infra"])] == []


async def test_a_timeout_names_no_one(inbox: Inbox) -> None:
    rec, _ = await inbox.submit(parse_submission(request_body("s")), 1.0, 1)
    await inbox.settle(rec.id, Settlement(option_id="reject_once", by="timeout", via=Via.TIMEOUT, now=9.0,
                       state=EXPIRED))
    (e,) = await _entries(inbox)
    assert e["answered_by"] == [] and e["via"] == "timeout" and e["option_id"] == "reject_once"


async def test_two_daemons_settling_at_once_make_one_chain(pg_url: str) -> None:
    a, b = Inbox(create(pg_url, holder="a")), Inbox(create(pg_url, holder="b"))
    await asyncio.gather(a.open(), b.open())
    try:
        recs = [(await a.submit(parse_submission(request_body("s")), 1.0, 60))[0] for _ in range(40)]
        await asyncio.gather(*(
            ib.settle(r.id, Settlement(option_id="allow_once", by=f"@{i}:x", via=Via.MATRIX, now=2.0))
            for i, (r, ib) in enumerate(zip(recs, [a, b] * 20, strict=True))
        ))
        got = await _entries(b)
        assert len(got) == 40 and _check(got).problem is None
        assert sorted(str(e["request_id"]) for e in got) == sorted(r.id for r in recs)
    finally:
        await a.close()
        await b.close()


async def test_the_bench_switch_turns_appends_off(inbox: Inbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ledger.OFF_ENV, "1")
    rec, _ = await inbox.submit(parse_submission(request_body("s")), 1.0, 60)
    assert await inbox.settle(rec.id, Settlement(option_id="allow_once", by="@a:x", via=Via.MATRIX, now=2.0))
    assert await _entries(inbox) == []


def test_lines_are_checked_by_their_exact_text_or_their_content() -> None:
    good = _chain(3)
    c = Checker()
    assert all(c.feed_line(line(e) + "\n") for e in good[:2])  # as exported: hashed as written
    assert c.feed_line(json.dumps(good[2], indent=1))  # the same entry written otherwise: hashed from its content
    assert c.problem is None and c.count == 3
    bad = Checker()
    assert not bad.feed_line(line(good[0]).replace('"timeout"', '"api"'))
    assert bad.bad_seq == 1 and "hash does not match" in str(bad.problem)
    assert not Checker().feed_line("{not json")
