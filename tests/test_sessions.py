"""Sessions (bot.inbox.sessions) on both engines: a session is one room's, the caps on pending requests,
the ACP proxy's claim on a session."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bot.events.states import Via
from bot.inbox import sessions
from bot.inbox.db import create
from bot.inbox.record import Settlement
from bot.inbox.sessions import PendingCaps, SessionClaimed, SessionInOtherRoom, TooManyPending, claim, proxy_of
from bot.inbox.store import Inbox
from bot.inbox.submission import KeyConflict, Submission, parse_submission
from bot.service.floods import Floods
from tests.support.station import request_body

ORIGIN, OTHER = "a" * 32, "b" * 32


def _sub(sid: str, call: str = "c", key: str | None = None) -> Submission:
    return parse_submission(request_body(sid, tool_call_id=call, key=key))


async def test_a_session_is_the_room_of_its_first_request(inbox: Inbox) -> None:
    rec, _ = await inbox.submit(_sub("s", key="k1"), 1.0, 60, "agent-a", room="default")
    for key in (None, "k1", "k2"):  # the same key and body too: never the stored record
        with pytest.raises(SessionInOtherRoom) as e:
            await inbox.submit(_sub("s", key=key), 1.0, 60, "infra", room="infra")
        assert isinstance(e.value, KeyConflict) and "default" not in str(e.value)
    nxt, _ = await inbox.submit(_sub("s", "c2"), 1.0, 60, "agent-a", room="default")
    assert (rec.id, nxt.id) == ("s:1", "s:2")  # no number taken by the refused ones


async def test_caps_per_token_and_per_session(inbox: Inbox) -> None:
    caps = PendingCaps(per_token=3, per_session=2)
    for n, sid in enumerate(["s1", "s1", "s2"]):
        await inbox.submit(_sub(sid, f"c{n}", key=f"k{n}"), 1.0, 60, "tok", caps=caps)
    with pytest.raises(TooManyPending) as e:
        await inbox.submit(_sub("s3"), 1.0, 60, "tok", caps=caps)
    assert e.value.token == "tok" and "max_pending_per_token = 3" in str(e.value)
    with pytest.raises(TooManyPending) as e:
        await inbox.submit(_sub("s1", "c9"), 1.0, 60, "other", caps=caps)
    assert e.value.token is None and "max_pending_per_session = 2" in str(e.value)
    again, created = await inbox.submit(_sub("s1", "c0", key="k0"), 1.0, 60, "tok", caps=caps)
    assert not created and again.id == "s1:1"  # an idempotent repeat is never refused
    await inbox.settle("s1:1", Settlement(option_id=None, by="x", via=Via.CANCEL, now=2.0))
    rec, created = await inbox.submit(_sub("s4"), 1.0, 60, "tok", caps=caps)  # one settled: room again
    assert created and rec.id == "s4:1"


async def test_a_flood_by_the_token_alone_never_fills_its_proxy_runs_or_hooks_budget(inbox: Inbox) -> None:
    caps = PendingCaps(per_token=3, per_session=2)
    for n in range(3):  # the token alone (a model that read it): its own budget, full
        await inbox.submit(_sub(f"junk{n}"), 1.0, 60, "tok", caps=caps)
    with pytest.raises(TooManyPending, match="max_pending_per_token = 3") as e:
        await inbox.submit(_sub("junk9"), 1.0, 60, "tok", caps=caps)
    assert e.value.token == "tok"
    with pytest.raises(TooManyPending):  # a key of a run that claimed no session proves nothing
        await inbox.submit(_sub("unclaimed", key=f"{ORIGIN}:1"), 1.0, 60, "tok", caps=caps)
    for sid in ("p1", "p2"):
        async with inbox.database.transaction() as db:
            await claim(db, sid, "default", ORIGIN, "tok")
    with pytest.raises(TooManyPending):  # the run's key in a session another run claimed: the token alone
        async with inbox.database.transaction() as db:
            await claim(db, "q", "default", OTHER, "tok")
        await inbox.submit(_sub("q", key=f"{ORIGIN}:1"), 1.0, 60, "tok", caps=caps)
    for n, sid in enumerate(["p1", "p1", "p2"]):  # the proxy run's own requests: posted all the same
        _, created = await inbox.submit(_sub(sid, f"c{n}", key=f"{ORIGIN}:{n + 1}"), 1.0, 60, "tok", caps=caps)
        assert created
    with pytest.raises(TooManyPending, match="requests of its ACP proxy run") as e:  # and capped on their own
        await inbox.submit(_sub("p2", "c9", key=f"{ORIGIN}:9"), 1.0, 60, "tok", caps=caps)
    assert e.value.token is None
    for n in range(3):  # a hook the daemon holds: a budget of its own too
        _, created = await inbox.submit(_sub(f"h{n}", key=f"hook-{n}"), 1.0, 60, "tok", caps=caps, held_by="d1")
        assert created
    with pytest.raises(TooManyPending, match="held hooks"):
        await inbox.submit(_sub("h9", key="hook-9"), 1.0, 60, "tok", caps=caps, held_by="d1")


async def test_a_proxy_claims_a_session_once_and_before_any_hook(inbox: Inbox) -> None:
    async with inbox.database.transaction() as db:
        await claim(db, "s", "default", ORIGIN, "laptop")
        await claim(db, "s", "default", ORIGIN, "laptop")  # the same claim again: fine
    for origin, room, token, err in [(ORIGIN, "default", "other", SessionClaimed),
                                     (OTHER, "default", "other", SessionClaimed),
                                     (ORIGIN, "infra", "laptop", SessionInOtherRoom)]:
        with pytest.raises(err):
            async with inbox.database.transaction() as db:
                await claim(db, "s", room, origin, token)
    got = await proxy_of(inbox.database, "s")
    assert got is not None and (got.origin, got.token) == (ORIGIN, "laptop")
    async with inbox.database.transaction() as db:  # a later run of the same token's proxy loads the session again
        await claim(db, "s", "default", OTHER, "laptop")
    got = await proxy_of(inbox.database, "s")
    assert got is not None and got.origin == OTHER
    async with inbox.database.transaction() as db:
        await claim(db, "s", "default", ORIGIN, "laptop")
    rec, _ = await inbox.submit(_sub("s"), 1.0, 60, "laptop")
    assert rec.id == "s:1"  # a claim takes no number
    await inbox.submit(_sub("h", key=sessions.HOOK_KEY_PREFIX + "1"), 1.0, 60, "laptop")
    with pytest.raises(SessionClaimed):  # a hook asked first: a claim now proves nothing
        async with inbox.database.transaction() as db:
            await claim(db, "h", "default", ORIGIN, "laptop")
    assert await proxy_of(inbox.database, "h") is None and await proxy_of(inbox.database, "nobody") is None


async def test_the_pending_counts_are_index_lookups(tmp_path: Path) -> None:
    path = tmp_path / "inbox.sqlite3"
    ib = Inbox(create(f"sqlite:{path}"))
    await ib.open()
    await ib.close()
    db = sqlite3.connect(path)
    try:
        for sql, index in [
            ("SELECT COUNT(*) FROM requests WHERE submitted_by=? AND state='pending'", "requests_pending_token"),
            ("SELECT COUNT(*) FROM requests WHERE session_id=? AND state='pending'", "requests_pending_session"),
        ]:
            plan = " ".join(str(r[-1]) for r in db.execute("EXPLAIN QUERY PLAN " + sql, ("x",)))
            assert index in plan, plan
    finally:
        db.close()


def test_the_room_hears_a_token_at_its_cap_once_an_episode() -> None:
    posted: list[tuple[str, str]] = []
    floods = Floods(PendingCaps(per_token=50, per_session=20), lambda room, text: posted.append((room, text)))
    for _ in range(100):
        floods.refused("agent-b", "default", 0.0)
    floods.refused(None, "default", 0.0)  # a session's cap: no notice
    assert len(posted) == 1 and posted[0][0] == "default" and "'agent-b' has 50 pending" in posted[0][1]
    floods.accepted("agent-b")  # below the cap again: the next time it is there, the room hears it again
    floods.refused("agent-b", "default", 3600.0)
    assert len(posted) == 2 and posted[0][1] != posted[1][1]  # another text: never one transaction id twice
