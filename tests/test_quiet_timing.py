"""When the room is quiet for keycaps (bot/room/quiet.py), and request_timing (bot/room/timing.py)."""

from __future__ import annotations

from typing import Any

from structlog.testing import capture_logs

from bot.room.quiet import AGAIN_WAIT, ANSWER_WAIT, EDIT_MAX_WAIT, EditPacer, Quiet
from bot.room.timing import Timings, intervals


def test_a_fresh_pending_prompt_keeps_the_room_busy_until_answered_or_old() -> None:
    q = Quiet()
    assert q.busy_for(100.0, posting=False) == 0.0
    q.posted("a", 100.0)
    assert abs(q.busy_for(100.2, posting=False) - (ANSWER_WAIT - 0.2)) < 1e-9
    assert q.busy_for(100.0 + ANSWER_WAIT, posting=False) == 0.0  # the person is reading: quiet again
    q.posted("b", 200.0)
    q.settled("b", 200.05)
    assert abs(q.busy_for(200.05, posting=False) - AGAIN_WAIT) < 1e-9  # the agent may ask again at once
    assert q.busy_for(200.05 + AGAIN_WAIT, posting=False) == 0.0
    assert q.busy_for(300.0, posting=True) > 0  # a prompt on its way


def test_held_edits_go_when_quiet_or_overdue_after_the_next_post() -> None:
    p = EditPacer()
    assert p.wait(10.0, busy=0.0, posts=3) == 0.0 and not p.holding  # quiet: at once
    assert p.wait(10.0, busy=0.5, posts=3) == 0.5 and p.holding  # busy: wait for quiet...
    assert abs(p.wait(10.0 + EDIT_MAX_WAIT - 0.2, busy=0.5, posts=5) - 0.2) < 1e-9  # ...at most EDIT_MAX_WAIT
    assert p.wait(10.0 + EDIT_MAX_WAIT, busy=0.5, posts=3) == 0.5  # overdue, no prompt posted since: wait
    assert p.wait(10.0 + EDIT_MAX_WAIT, busy=0.5, posts=4) == 0.0 and not p.holding  # right after a post
    assert p.wait(20.0, busy=0.5, posts=4) == 0.5  # the next ones wait afresh
    p.done()
    assert not p.holding


def test_intervals_are_only_those_both_of_whose_stamps_are_known() -> None:
    got = intervals({"submitted": 1.0, "posted": 1.03, "settled": 1.2})
    assert got == {"submit_to_post_ms": 30.0, "submit_to_settled_ms": 200.0}


def _rec(rid: str, requested: float, decided: float | None = None) -> Any:
    class R:  # the two fields Timings reads
        id = rid
        requested_at = requested
        outcome = None if decided is None else type("O", (), {"decided_at": decided})()

    return R()


async def test_one_request_timing_event_per_request_with_the_answer_stamps() -> None:
    t = Timings()
    t.on_change("request", _rec("r1", 10.0))
    t.mark("r1", "posted", 10.03)
    seen_at = iter([10.2])

    async def handler(source: dict[str, Any]) -> None:
        t.on_change("resolved", _rec("r1", 10.0, decided=10.201))

    timed = t.room_handler(handler, lambda: next(seen_at))
    await timed({"origin_server_ts": 10_150})
    with capture_logs() as logs:
        t.edited("r1", 10.5, via="matrix")
        t.edited("r1", 10.6)  # once only
    assert len(logs) == 1 and logs[0]["event"] == "request_timing"
    ev = logs[0]
    assert ev["submit_to_post_ms"] == 30.0 and ev["post_to_answer_ms"] == 120.0
    assert ev["answer_to_seen_ms"] == 50.0 and ev["seen_to_settled_ms"] == 1.0 and ev["settled_to_edit_ms"] == 299.0
    assert ev["via"] == "matrix"


def test_tracked_requests_are_bounded() -> None:
    t = Timings(max_tracked=3)
    for i in range(10):
        t.mark(f"r{i}", "submitted", float(i))
    with capture_logs() as logs:
        t.edited("r0", 1.0)
        t.edited("r9", 10.0)
    assert [e["request_id"] for e in logs] == ["r9"]
