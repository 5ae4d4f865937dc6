"""The in-process parts of surviving faults: the retry policy, the sync token saved through a
failing disk, the stop at any stage, and what /healthz concludes."""

from __future__ import annotations

import asyncio
import sqlite3
from types import SimpleNamespace
from typing import Any, cast

import aiohttp
import pytest

from bot.door.daemon_client import DaemonBackoff
from bot.inbox.db.fence import Deposed
from bot.inbox.record import Settlement
from bot.inbox.store import Inbox
from bot.matrix.errors import MatrixFatal
from bot.matrix.retry import MatrixBackoff, retry
from bot.matrix.sync import SYNC_KEY, Syncer
from bot.service import health
from bot.service.supervisor import Supervisor
from bot.util.backoff import NO_JITTER, Backoff, KeyedBackoff
from bot.util.outage import Outage


def test_backoff_doubles_to_the_cap_with_jitter_and_resets() -> None:
    b = Backoff(first=1.0, cap=8.0)
    got = [b.delay() for _ in range(6)]
    for d, base in zip(got, [1, 2, 4, 8, 8, 8], strict=True):
        assert 0.8 * base <= d <= 1.2 * base
    b.reset()
    assert b.delay() <= 1.2


def test_each_side_keeps_its_own_numbers() -> None:
    b = Backoff(0.5, 30.0, NO_JITTER)
    assert [b.delay() for _ in range(8)] == [0.5, 1, 2, 4, 8, 16, 30, 30]  # the notices: no jitter
    m = MatrixBackoff()
    assert (m.first, m.cap, m.jitter) == (0.5, 30.0, (0.8, 1.2))
    d = DaemonBackoff()
    assert (d.first, d.cap) == (0.1, 2.0)
    got = [d.delay() for _ in range(6)]
    for pause, base in zip(got, [0.1, 0.2, 0.4, 0.8, 1.6, 2.0], strict=True):
        assert 0.8 * base <= pause <= base  # the proxy's jitter only shortens
    assert DaemonBackoff(cap=0.5).cap == 0.5


def test_keyed_backoff_paces_each_key_alone() -> None:
    k = KeyedBackoff(lambda: Backoff(1.0, 4.0, NO_JITTER))
    assert k.ready("a", 0.0) and k.next_in(0.0, 10.0) == 10.0
    assert k.failed("a", 0.0) == 1.0 and k.failed("a", 1.0) == 2.0
    assert not k.ready("a", 2.5) and k.ready("a", 3.0) and k.ready("b", 0.0)
    assert k.waiting() == 1 and k.next_in(2.0, 10.0) == 1.0
    k.ok("a")
    assert k.waiting() == 0 and k.failed("a", 0.0) == 1.0  # a success starts it over


async def test_retry_backs_off_network_errors_by_type_and_gives_up_after_attempts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("bot.matrix.retry.FIRST_DELAY", 0.001)
    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise aiohttp.ServerDisconnectedError()
        return "ok"

    assert await retry("t", flaky) == "ok" and calls == 3

    async def down() -> None:
        raise aiohttp.ClientOSError(111, "Connection refused")

    with pytest.raises(aiohttp.ClientError):
        await retry("t", down, attempts=2)

    async def bug() -> None:
        raise ValueError("not a network error")

    with pytest.raises(ValueError):  # only the network is retried
        await retry("t", bug)


class FlakyDisk:
    """A key/value store whose writes fail ``failures`` times (a full or read-only disk)."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.saved: dict[str, Any] = {}

    async def get_json(self, k: str) -> Any:
        return self.saved.get(k)

    async def set_json(self, k: str, v: Any) -> None:
        if self.failures:
            self.failures -= 1
            raise sqlite3.OperationalError("attempt to write a readonly database")
        self.saved[k] = v


def _syncer(kv: FlakyDisk) -> Syncer:
    st = SimpleNamespace(kv=kv)
    return Syncer(cast(Any, st), [])


async def test_sync_token_save_is_retried_through_a_failing_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bot.matrix.retry.FIRST_DELAY", 0.001)
    kv = FlakyDisk(failures=4)
    syncer = _syncer(kv)
    assert await syncer._save_token("s42", asyncio.Event()) is True
    assert kv.saved[SYNC_KEY] == "s42" and kv.failures == 0


async def test_sync_token_save_gives_way_to_a_stop() -> None:
    kv = FlakyDisk(failures=10**6)
    stop = asyncio.Event()
    stop.set()
    assert await asyncio.wait_for(_syncer(kv)._save_token("s1", stop), 5) is False
    assert SYNC_KEY not in kv.saved


class StandIn:
    """A daemon whose log-in does what ``connect`` is given, with no Matrix-side tasks."""

    def __init__(self, run: Any, ready: bool = False) -> None:
        self.stop = asyncio.Event()
        self.ready = ready
        self._run = run
        self.leadership: Any = AlwaysLeader()
        self.demoted = 0

    async def connect(self) -> None:
        await self._run()

    async def demote(self) -> None:
        self.demoted += 1

    async def timer_loop(self) -> None:
        await self.stop.wait()

    def matrix_tasks(self) -> list[asyncio.Task[None]]:
        return []


class AlwaysLeader:
    """A daemon's leadership on SQLite: elected at once, never deposed."""

    async def elect(self) -> None:
        pass

    async def while_leading(self, body: Any) -> None:
        await body()


class DeposedAfterLogIn(AlwaysLeader):
    """The first term ends under the running Matrix side (another daemon took over); the next one lasts."""

    def __init__(self) -> None:
        self.terms = 0
        self.role = "leader"

    async def elect(self) -> None:
        self.terms += 1

    async def while_leading(self, body: Any) -> None:
        main = asyncio.create_task(body())
        if self.terms > 1:
            await main
            return
        await asyncio.sleep(0.05)
        main.cancel()
        await asyncio.gather(main, return_exceptions=True)
        raise Deposed("term 1 is over (now 2)")


def _run_until_stopped(d: Any) -> Any:
    return Supervisor(d)._matrix_until_stopped()


async def test_a_deposed_leader_demotes_itself_and_is_elected_again_never_exits() -> None:
    d = StandIn(lambda: asyncio.sleep(0), ready=True)
    d.leadership = DeposedAfterLogIn()
    run = asyncio.create_task(_run_until_stopped(cast(Any, d)))
    while d.leadership.terms < 2:  # demoted, then elected again: a second term, in the same process
        assert not run.done(), run.result()
        await asyncio.sleep(0.01)
    assert d.demoted == 1
    d.stop.set()
    assert await asyncio.wait_for(run, 5) == 0


async def test_stop_while_login_waits_on_an_unreachable_homeserver_ends_at_once() -> None:
    d = StandIn(lambda: asyncio.sleep(3600))
    asyncio.get_running_loop().call_later(0.05, d.stop.set)
    assert await asyncio.wait_for(_run_until_stopped(cast(Any, d)), 5) == 0


async def test_a_crash_or_a_fatal_error_exits_1_never_0() -> None:
    async def crash() -> None:
        raise RuntimeError("boom")

    async def fatal() -> None:
        raise MatrixFatal("token revoked")

    assert await _run_until_stopped(cast(Any, StandIn(crash, ready=True))) == 1
    assert await _run_until_stopped(cast(Any, StandIn(fatal, ready=True))) == 1


def _facts(**kw: Any) -> health.Facts:
    base: dict[str, Any] = {"ready": True, "joined": True, "last_sync_ok": 100.0, "ready_at": 90.0,
                            "sync_timeout": 5.0, "send_failing": None}
    return health.Facts(**(base | kw))


def test_health_says_what_is_true() -> None:
    assert health.body(_facts(), 105.0, True)["status"] == "ok"
    assert health.reasons(_facts(ready=False), 105.0)[0].startswith("not joined to the station room yet")
    assert "not in the station room" in health.reasons(_facts(joined=False), 105.0)[0]
    assert "not synced for 11 s" in health.reasons(_facts(), 111.0)[0]
    assert health.reasons(_facts(last_sync_ok=0.0, ready_at=100.0), 109.0) == []  # just started
    b = health.body(_facts(send_failing="M_FORBIDDEN: not in room"), 101.0, True)
    assert b["status"] == "degraded" and b["ok"] is False and b["live"] is True and b["matrix_ready"] is True
    assert b["reasons"] == ["sends failing: M_FORBIDDEN: not in room"]


def test_a_flood_of_one_warning_is_thinned_and_counted() -> None:
    from bot.util.logs import Repeats

    now = [0.0]
    r = Repeats(burst=3, window=10.0, clock=lambda: now[0])
    got = [r.allow("api_handler_failed") for _ in range(1000)]
    assert got[:3] == [0, 0, 0] and set(got[3:]) == {None}
    assert r.allow("another_event") == 0  # other events are not held up
    now[0] = 10.0
    assert r.allow("api_handler_failed") == 997  # the next window says how many were dropped
    ev = {"event": "request_submitted"}
    for _ in range(100):  # the audit trail (info) is never thinned
        assert r(None, "info", dict(ev)) == ev


def test_the_size_check_counts_megolm_growth_in_an_encrypted_room() -> None:
    """CJK text fits a plain room but, escaped and base64-encoded, not an encrypted one."""
    from bot.inbox.submission import parse_submission
    from bot.room.posts import TooLarge, check_submission
    from tests.support.station import request_body

    body = request_body("s")
    body["options"] = [{"optionId": f"{i:02d}" + "中" * 150, "name": "中" * 200, "kind": "allow_once"}
                       for i in range(16)]
    body["toolCall"]["title"] = "中" * 5000
    sub = parse_submission(body)
    check_submission(sub, 0.0, 600.0, encrypted=False)
    with pytest.raises(TooLarge, match=r"prompt would take .* in an encrypted room"):
        check_submission(sub, 0.0, 600.0, encrypted=True)


def test_a_dead_webhook_pins_at_most_its_byte_budget() -> None:
    """Large records to an endpoint that never answers: the queue stops at MAX_QUEUED_BYTES."""
    from bot.config import WebhookConfig
    from bot.inbox.submission import parse_submission
    from bot.room.posts import provisional
    from bot.service.webhooks import MAX_QUEUED_BYTES, Webhooks
    from tests.support.station import request_body

    body = request_body("s")
    body["toolCall"]["rawInput"] = {"command": "x" * 200_000}
    rec = provisional(parse_submission(body), 0.0, 600.0)
    hooks = Webhooks([WebhookConfig(url="http://127.0.0.1:9/dead")])
    for _ in range(200):  # ~40 MB offered
        hooks.on_change("request", rec)
    assert 0 < hooks.queued_bytes[0] <= MAX_QUEUED_BYTES
    assert hooks.failed == 200 - hooks.queues[0].qsize() > 100


async def test_reads_never_see_a_settle_that_is_then_rolled_back(sqlite_inbox: Inbox) -> None:
    """A long-poll (or GET) that runs while a settling transaction is open sees the committed
    state only: a settle rolled back was never reported."""
    from bot.inbox.submission import parse_submission
    from tests.support.station import request_body

    rec, _ = await sqlite_inbox.submit(parse_submission(request_body("s")), 1.0, 600)
    seen: list[Any] = []
    written, read = asyncio.Event(), asyncio.Event()

    async def reader() -> None:  # another task (an API request) reads meanwhile
        await written.wait()
        seen.append(await sqlite_inbox.wait_settled(rec.id, 0))
        seen.append(await sqlite_inbox.pending())
        read.set()

    task = asyncio.create_task(reader())
    with pytest.raises(RuntimeError):
        async with sqlite_inbox.database.transaction() as db:
            await db.execute("UPDATE requests SET state='resolved', outcome_option_id='allow_once',"
                             " outcome_by='x', outcome_via='api', decided_at=2 WHERE id=$1", rec.id)
            written.set()
            await read.wait()
            raise RuntimeError("the disk failed before COMMIT")
    await task
    got = seen[0]
    assert got is not None and got.state == "pending" and [r.id for r in seen[1]] == [rec.id]
    after = await sqlite_inbox.get(rec.id)
    assert after is not None and after.state == "pending"
    settled = await sqlite_inbox.settle(rec.id, Settlement(option_id="allow_once", by="a", via="api", now=3.0))
    assert settled is not None
    now_read = await sqlite_inbox.get(rec.id)
    assert now_read is not None and now_read.state == "resolved"  # committed writes are seen at once


async def test_a_failed_commit_is_rolled_back_and_the_next_transaction_works(sqlite_inbox: Inbox) -> None:
    """A COMMIT that fails (as on a full or read-only disk; here a deferred constraint) must not
    leave the write connection inside a transaction, or every later write would fail."""
    from bot.inbox.submission import parse_submission
    from tests.support.station import request_body

    writer = sqlite_inbox.database.writer  # type: ignore[attr-defined]
    raw = writer.raw
    await writer.execute("PRAGMA foreign_keys=ON")
    await writer.execute("CREATE TABLE t_parent (id INTEGER PRIMARY KEY)")
    await writer.execute("CREATE TABLE t_child (p INTEGER REFERENCES t_parent(id) DEFERRABLE INITIALLY DEFERRED)")
    with pytest.raises(sqlite3.IntegrityError):
        async with sqlite_inbox.database.transaction() as db:
            await db.execute("INSERT INTO t_child (p) VALUES (42)")  # fails only at COMMIT
    assert not raw.in_transaction
    rec, created = await sqlite_inbox.submit(parse_submission(request_body("s")), 1.0, 600)
    assert created and (await sqlite_inbox.get(rec.id)) is not None


class WholeStandIn(StandIn):
    """A stand-in with a timer, a webhook sender and Matrix-side tasks, one of which fails."""

    def __init__(self) -> None:
        super().__init__(lambda: asyncio.sleep(0), ready=True)
        self.webhooks = SimpleNamespace(run=lambda stop: stop.wait())
        self.leases = SimpleNamespace(run=lambda stop: stop.wait())  # the hook leases (bot.service.hook_leases)
        self.tasks: list[asyncio.Task[None]] = []

    async def timer_loop(self) -> None:
        await asyncio.sleep(3600)

    def matrix_tasks(self) -> list[asyncio.Task[None]]:
        async def sync() -> None:
            await asyncio.sleep(0.05)
            raise RuntimeError("sync broke")

        self.tasks = [asyncio.create_task(sync()), asyncio.create_task(asyncio.sleep(3600))]
        return self.tasks


async def test_one_failing_task_stops_every_task_and_exits_1() -> None:
    before = asyncio.all_tasks()  # the session's loop may run other tests' tasks (a station's people)
    d = WholeStandIn()
    assert await asyncio.wait_for(Supervisor(cast(Any, d)).run(), 5) == 1
    assert d.stop.is_set() and d.tasks and all(t.done() for t in d.tasks)
    assert not [t for t in asyncio.all_tasks() - before if t is not asyncio.current_task()]


def test_healthz_says_the_role_and_a_standby_has_no_matrix_reasons() -> None:
    assert health.body(_facts(), 105.0, True)["role"] == "leader"
    standby = health.body(_facts(ready=False, ready_at=0.0), 105.0, False, role="standby")
    assert standby["role"] == "standby" and standby["status"] == "ok" and standby["reasons"] == []
    assert health.body(_facts(ready=False, ready_at=0.0), 105.0, False)["status"] == "degraded"


class Said:
    """A logger that keeps (level, event, fields)."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []

    def __getattr__(self, level: str) -> Any:
        return lambda event, **kw: self.lines.append((level, event, kw))


def test_an_outage_is_one_warning_with_its_reason_and_one_line_when_back() -> None:
    said, t = Said(), [100.0]
    out = Outage(said, "outbox_state_unavailable", "outbox_state_back", clock=lambda: t[0], worker="post")
    out.ok()  # no outage: nothing said
    for _ in range(5):
        out.failed(ConnectionRefusedError("[Errno 111] Connection refused"), 0.5)
        t[0] += 0.5
    out.ok()
    out.ok()
    levels = [(lvl, ev) for lvl, ev, _ in said.lines]
    assert levels == [("warning", "outbox_state_unavailable"), *[("debug", "outbox_state_unavailable")] * 4,
                      ("info", "outbox_state_back")]
    warning, back = said.lines[0][2], said.lines[-1][2]
    assert warning == {"worker": "post", "error": "ConnectionRefusedError: [Errno 111] Connection refused",
                       "retry_in": 0.5}
    assert back == {"worker": "post", "after_s": 2.5, "attempts": 5}
    out.failed("again", event="outbox_other")  # a new outage: a warning again
    assert said.lines[-1][:2] == ("warning", "outbox_other")


async def test_the_expiry_timer_tries_again_soon_after_a_database_error() -> None:
    """The database away: the timer tries again within seconds (a back-off), not after its 30 s idle wait, so a
    request that fell due meanwhile expires in time once the database is back."""
    from bot.inbox.db import DatabaseError
    from bot.service.daemon import Daemon

    calls: list[int] = []
    stop = asyncio.Event()

    async def due(now: float) -> list[Any]:
        calls.append(1)
        if len(calls) >= 3:
            stop.set()
        raise DatabaseError("state.database: lost the connection")

    async def nothing(*_: Any) -> bool:
        return False

    fake = SimpleNamespace(
        stop=stop, wake_timer=asyncio.Event(), now=lambda: 1000.0,
        session_rules=SimpleNamespace(expire=nothing), inbox=SimpleNamespace(due=due),
        cfg=SimpleNamespace(prompts=SimpleNamespace(session_rule_ttl=3600.0, on_timeout="reject")),
    )
    await asyncio.wait_for(Daemon.timer_loop(cast(Daemon, fake)), 8)
    assert len(calls) == 3
