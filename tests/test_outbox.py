"""The outbox in-process: keycap seeding and clean-up never stand in front of a prompt or an edit; an edit
the room already shows (by the answer that settled it) never stands in front of the next prompt.

The shared fake Matrix façade (tests/support/fakematrix.py) records every send in order; the inbox is the
real SQLite one.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from bot.config import PromptsConfig
from bot.inbox.record import Settlement
from bot.inbox.store import Inbox
from bot.inbox.submission import parse_submission
from bot.matrix.txn import txn_id
from bot.room.outbox import Outbox
from bot.service.metrics import Metrics
from tests.support.fake_facade import FakeMatrix
from tests.support.station import request_body


async def _until(pred: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


@pytest.fixture
async def rig(sqlite_inbox: Inbox):
    matrix = FakeMatrix()
    stop = asyncio.Event()

    async def reprocess(_source: dict[str, Any]) -> None:
        return None

    prompts = PromptsConfig(clear_reactions=True)  # the clean-up runs here (by default the seeds stay)
    box = Outbox(sqlite_inbox, matrix, Metrics(), prompts, stop, time.time, reprocess)  # type: ignore[arg-type]
    sqlite_inbox.listen(box.on_change)
    tasks = box.tasks()
    yield sqlite_inbox, matrix, box
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _submit(inbox: Inbox, sid: str, n: int) -> list[str]:
    ids = []
    for i in range(n):
        rec, _ = await inbox.submit(parse_submission(request_body(sid, tool_call_id=f"c{i}")), time.time(), 600)
        ids.append(rec.id)
    return ids


async def _settle(inbox: Inbox, rid: str) -> None:
    await inbox.settle(rid, Settlement(option_id="allow_once", by="@alice:x", via="matrix", now=time.time()))


async def test_edits_are_not_queued_behind_keycap_clean_up(rig: Any) -> None:
    inbox, matrix, _box = rig
    ids = await _submit(inbox, "s", 20)
    await _until(lambda: matrix.kinds().count("reaction") == 20 * 2, timeout=30)  # every prompt seeded (1 and 3)
    for rid in ids[:-1]:  # a burst of answers: 38 keycaps to take back
        await _settle(inbox, rid)
    await _until(lambda: "redact" in matrix.kinds())
    await _settle(inbox, ids[-1])  # answered while the clean-up is under way
    await _until(lambda: matrix.kinds().count("edit") == 20)
    edits_at = [i for i, (k, _t) in enumerate(matrix.sent) if k == "edit"]
    redacts_before_last_edit = sum(1 for k in matrix.kinds()[: edits_at[-1]] if k == "redact")
    assert redacts_before_last_edit <= 20, f"the last edit waited behind {redacts_before_last_edit} redactions"
    await _until(lambda: matrix.kinds().count("redact") == 40, timeout=30)  # and the clean-up still finishes


async def test_a_new_prompt_is_not_queued_behind_keycap_seeding(rig: Any) -> None:
    inbox, matrix, _box = rig
    await _submit(inbox, "s", 10)
    await _until(lambda: "reaction" in matrix.kinds(), timeout=10)
    seen = len(matrix.sent)
    await _submit(inbox, "t", 1)
    await _until(lambda: matrix.kinds().count("post") == 11)
    post_at = max(i for i, (k, _t) in enumerate(matrix.sent) if k == "post")
    assert post_at - seen <= 2, matrix.kinds()[seen:post_at + 1]  # at most the reaction already in flight


def _order(matrix: FakeMatrix) -> list[str]:
    return [k for k in matrix.kinds() if k in ("post", "edit")]


async def test_each_edit_goes_before_the_next_prompt(rig: Any) -> None:
    """An agent asks again at once after each answer: the room shows each prompt settled before the next one
    (a plain answer binds only then), and the edit never lands in the middle of the next round."""
    inbox, matrix, _box = rig
    for i in range(5):
        (rid,) = await _submit(inbox, f"s{i}", 1)
        await _until(lambda i=i: _order(matrix).count("post") == i + 1)
        await _settle(inbox, rid)  # answered at once, and the agent asks again at once
    await _until(lambda: _order(matrix).count("edit") == 5)
    assert _order(matrix) == ["post", "edit"] * 5


async def test_txn_ids_carry_the_inbox_install_id(rig: Any) -> None:
    from bot.matrix.txn import txn_id

    inbox, matrix, _box = rig
    (rid,) = await _submit(inbox, "s", 1)
    await _until(lambda: "post" in matrix.kinds())
    assert inbox.install_id != ""  # the outbox sends with its inbox's install id
    assert ("post", txn_id("p", inbox.install_id, rid)) in matrix.sent


async def _answer(inbox: Inbox, rid: str, n: int) -> None:
    """A room answer seen where it sits settles ``rid``: its place marks the prompt settled (bot.answers.timeline)."""
    await inbox.place(f"$answer{n}", "answer")
    await inbox.settle(rid, Settlement(option_id="allow_once", by="@alice:x", via="matrix", now=time.time(),
                       event_id=f"$answer{n}", in_view=True))


def _edits(matrix: FakeMatrix) -> list[str]:
    return [t for k, t in matrix.sent if k == "edit"]


async def test_an_edit_the_answer_already_shows_never_holds_the_next_prompt(rig: Any) -> None:
    """An agent asks again at once after each room answer: each new prompt goes at once, the edits later
    (when the room is quiet), each exactly once."""
    inbox, matrix, _box = rig
    for i in range(5):
        (rid,) = await _submit(inbox, f"s{i}", 1)
        await _until(lambda i=i: _order(matrix).count("post") == i + 1, timeout=2)
        await _answer(inbox, rid, i)
    await _until(lambda: len(_edits(matrix)) == 5)
    assert _order(matrix)[:5] == ["post"] * 5, _order(matrix)
    await asyncio.sleep(0.3)
    assert len(set(_edits(matrix))) == len(_edits(matrix)) == 5


async def test_an_edit_only_it_can_show_still_goes_before_the_next_prompt(rig: Any, monkeypatch: Any) -> None:
    """Settled through the API (nothing in the room shows it): its edit goes first, even while edits shown
    by their answers wait."""
    monkeypatch.setattr("bot.room.quiet.AGAIN_WAIT", 3.0)  # the room stays busy, and A's edit waits, however slowly
    monkeypatch.setattr("bot.room.quiet.EDIT_MAX_WAIT", 60.0)  # this test runs (it once took over 0.1 s under load)
    inbox, matrix, _box = rig
    (a,) = await _submit(inbox, "a", 1)
    await _until(lambda: _order(matrix) == ["post"])
    await _answer(inbox, a, 0)  # A's edit may wait
    (b,) = await _submit(inbox, "b", 1)
    await _until(lambda: _order(matrix).count("post") == 2)
    await _settle(inbox, b)  # B's may not
    await _submit(inbox, "c", 1)
    await _until(lambda: _order(matrix).count("post") == 3)
    b_edit = txn_id("e", inbox.install_id, b)
    sent = [t if k == "edit" else k for k, t in matrix.sent if k in ("post", "edit")]
    assert sent[:4] == ["post", "post", b_edit, "post"], sent  # B's edit before C's prompt, A's still waiting
    await _until(lambda: len(_edits(matrix)) == 2, timeout=20)  # A's, once the room is quiet


async def test_overdue_edits_go_even_while_the_agent_keeps_asking(rig: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr("bot.room.quiet.EDIT_MAX_WAIT", 0.3)
    inbox, matrix, _box = rig
    for i in range(40):  # about 0.05 s a round: the room is never quiet
        (rid,) = await _submit(inbox, f"s{i}", 1)
        await _until(lambda i=i: _order(matrix).count("post") == i + 1, timeout=2)
        await _answer(inbox, rid, i)
        await asyncio.sleep(0.02)
    assert _order(matrix).count("edit") >= 10, "edits waited for a quiet room that never came"
    await _until(lambda: len(_edits(matrix)) == 40)


async def test_edits_waiting_at_a_stop_are_sent_after_a_restart(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr("bot.room.quiet.ANSWER_WAIT", 60.0)  # a fresh prompt keeps the room busy: edits wait
    matrix = FakeMatrix()

    async def reprocess(_source: dict[str, Any]) -> None:
        return None

    async def run() -> tuple[Inbox, asyncio.Event, list[asyncio.Task[None]]]:
        inbox = Inbox(tmp_path / "inbox.sqlite3")
        await inbox.open()
        stop = asyncio.Event()
        box = Outbox(inbox, matrix, Metrics(), PromptsConfig(), stop, time.time, reprocess)  # type: ignore[arg-type]
        inbox.listen(box.on_change)
        return inbox, stop, box.tasks()

    async def halt(inbox: Inbox, stop: asyncio.Event, tasks: list[asyncio.Task[None]]) -> None:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        await inbox.close()

    inbox, stop, tasks = await run()
    ids = await _submit(inbox, "s", 3)
    await _until(lambda: _order(matrix).count("post") == 3)
    for i, rid in enumerate(ids):
        await _answer(inbox, rid, i)
    await _submit(inbox, "t", 1)
    await _until(lambda: _order(matrix).count("post") == 4)
    await asyncio.sleep(0.2)
    await halt(inbox, stop, tasks)
    assert _edits(matrix) == [], "the edits did not wait"
    monkeypatch.setattr("bot.room.quiet.ANSWER_WAIT", 1.0)
    inbox, stop, tasks = await run()  # the restart: nothing of the last run's memory, only the inbox
    try:
        await _until(lambda: len(_edits(matrix)) == 3)
        await asyncio.sleep(0.3)
        assert len(set(_edits(matrix))) == len(_edits(matrix)) == 3
        assert _order(matrix).count("post") == 4
    finally:
        await halt(inbox, stop, tasks)


async def test_sends_in_flight_never_exceed_the_send_concurrency(rig: Any) -> None:
    """40 prompts, then 40 edits only they can show: never more than SEND_CONCURRENCY of the bot's events on
    their way at once (more forks the room's DAG for good on Synapse), and the cap is used."""
    from bot.room.poster import SEND_CONCURRENCY

    inbox, matrix, _box = rig
    flying, most = 0, 0
    real = matrix.send

    async def counted(content: dict[str, Any], txn: str, event_type: str = "m.room.message", **kw: Any) -> str:
        nonlocal flying, most
        flying += 1
        most = max(most, flying)
        try:
            return await real(content, txn, event_type)
        finally:
            flying -= 1

    matrix.send = counted
    matrix.latency = 0.002
    ids = await _submit(inbox, "flight", 40)
    await _until(lambda: matrix.kinds().count("post") == 40)
    assert most == SEND_CONCURRENCY, most
    most = 0
    for rid in ids:  # an API decision: only its edit shows it, so it is sent at once (the settle worker)
        await inbox.settle(rid, Settlement(option_id="allow_once", by="api:ops", via="api", now=time.time()))
    await _until(lambda: matrix.kinds().count("edit") == 40)
    assert 1 < most <= SEND_CONCURRENCY, most


@pytest.mark.parametrize("limited", [True, False])
async def test_under_a_rate_limit_a_backlog_is_posted_in_the_order_it_came(sqlite_inbox: Inbox, limited: bool) -> None:
    """40 requests at once, sends slow enough to leave more than backlog.BACKLOG waiting: while the homeserver
    rate-limits the bot, oldest first throughout; without a limit the newest go early (the backlog's rule)."""
    matrix = FakeMatrix(latency=0.05)
    matrix.rate_limited = limited
    stop = asyncio.Event()

    async def reprocess(_source: dict[str, Any]) -> None:
        return None

    box = Outbox(sqlite_inbox, matrix, Metrics(), PromptsConfig(seed_reactions=False), stop,  # type: ignore[arg-type]
                 time.time, reprocess)
    ids = await _submit(sqlite_inbox, "s", 40)  # all waiting before the poster starts: a backlog
    sqlite_inbox.listen(box.on_change)
    tasks = box.tasks()
    try:
        await _until(lambda: matrix.kinds().count("post") == 40, timeout=30)
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    by_txn = {txn_id("p", sqlite_inbox.install_id, rid): n for n, rid in enumerate(ids)}
    order = [by_txn[t] for k, t in matrix.sent if k == "post"]
    if limited:
        assert order == list(range(40)), order
    else:
        assert order != list(range(40)) and order.index(39) < 20, order
