"""The bot's count of the homeserver's message limit (bot/matrix/rate.py, pure) and the gate over it
(bot/matrix/gate.py), with a homeserver's limit played in-process."""

from __future__ import annotations

import asyncio

import pytest
import structlog

from bot.matrix import rate
from bot.matrix.gate import RateGate
from bot.matrix.rate import BACKGROUND, EDIT, PROMPT, Bucket, Waiting
from bot.service import health


def _w(kind: str, order: float, seq: int, since: float = 0.0) -> Waiting:
    return Waiting(kind, order, seq, since)


def test_unlimited_until_refused() -> None:
    b = Bucket()
    assert not b.limited and b.spare(0.0)
    b.waiting.append(_w(BACKGROUND, 5.0, 0))
    assert b.pick(0.0) is b.waiting[0]  # nothing is counted before a refusal


def test_refusal_sets_the_bucket_by_retry_after() -> None:
    b = Bucket()
    assert b.refused(100.0, 5.0)  # starts a limit
    assert not b.refused(100.0, 5.0)  # a second refusal does not start another
    p = _w(PROMPT, 1.0, 0, 100.0)
    b.waiting.append(p)
    assert b.pick(104.9) is None
    assert b.next_in(100.0) == pytest.approx(5.0)
    assert b.pick(105.0) is p


def test_prompts_and_edits_by_request_order_background_last() -> None:
    b = Bucket()
    b.refused(0.0, 0.0)  # one token now
    bg = _w(BACKGROUND, 0.0, 0)
    p_new = _w(PROMPT, 20.0, 1)
    p_old = _w(PROMPT, 10.0, 2)
    b.waiting += [bg, p_new, p_old]
    assert b.pick(0.0) is p_old
    b.take(p_old, 0.0)
    assert b.pick(0.0) is None  # the bucket is empty
    assert b.pick(5.0) is p_new  # a token later; the background one needs the reserve
    b.take(p_new, 5.0)
    assert b.pick(5.0 + 5 * (1 + rate.RESERVE)) is bg


def test_an_optional_send_waits_like_background_and_is_spared_only_with_the_reserve() -> None:
    b = Bucket()
    b.refused(0.0, 0.0)
    opt, p = _w(rate.OPTIONAL, 0.0, 0), _w(PROMPT, 9.0, 1)
    b.waiting += [opt, p]
    assert b.pick(0.0) is p and not b.spare(0.0)
    b.take(p, 0.0)
    assert b.pick(5.0) is None and not b.spare(5.0)
    b.waiting.remove(opt)
    assert b.spare(5.0 * (2 + rate.RESERVE))


def test_an_edit_leaves_the_last_token_to_a_prompt_for_a_while() -> None:
    b = Bucket()
    b.refused(0.0, 0.0)  # one token
    e = _w(EDIT, 1.0, 0, since=0.0)
    b.waiting.append(e)
    assert b.pick(0.0) is None  # one token: kept for the next prompt
    p = _w(PROMPT, 2.0, 1, since=0.0)
    b.waiting.append(p)
    assert b.pick(0.0) is p
    b.take(p, 0.0)
    assert b.pick(rate.EDIT_HOLD) is e  # held long enough: the next token is its


def test_background_alone_goes_after_its_max_wait() -> None:
    b = Bucket()
    b.refused(0.0, 0.0)
    bg = _w(BACKGROUND, 0.0, 0, since=0.0)
    b.waiting.append(bg)
    assert b.pick(1.0) is None
    assert b.pick(rate.BACKGROUND_MAX_WAIT) is bg


def test_the_limit_ends_when_full_with_nothing_waiting() -> None:
    b = Bucket()
    b.refused(0.0, 5.0)
    w = _w(PROMPT, 0.0, 0, 0.0)
    b.waiting.append(w)
    b.take(w, 5.0)  # it waited 5 s
    assert b.ended(10.0) is None and not b.spare(10.0)
    full = b.end_in(10.0)
    assert full is not None and full > 0
    ep = b.ended(10.0 + full)
    assert ep is not None and not b.limited
    figures = ep.figures(10.0 + full)
    assert figures["refusals"] == 1 and figures["sends_delayed"] == 1 and figures["delay_max_s"] == 5.0


def test_healthz_says_it_with_the_remedy() -> None:
    facts = health.Facts(ready=True, joined=True, last_sync_ok=100.0, ready_at=1.0, sync_timeout=30.0,
                         send_failing=None, rate_limit={"limited": True, "now": {"refusals": 3}, "remedy": rate.REMEDY})
    body = health.body(facts, 100.0, True)
    assert body["status"] == "degraded"
    assert "override_ratelimit" in body["reasons"][0] and "3 refusals" in body["reasons"][0]  # type: ignore[index]
    ok = health.body(health.Facts(True, True, 100.0, 1.0, 30.0, None, {"limited": False, "refusals": 3}), 100.0, True)
    assert ok["status"] == "ok" and ok["rate_limit"] == {"limited": False, "refusals": 3}


class Server:
    """A homeserver's message limit, played: ``burst`` at once, then one send every ``every`` seconds."""

    def __init__(self, burst: int, every: float) -> None:
        self.burst, self.every = burst, every
        self.level = float(burst)
        self.at = asyncio.get_running_loop().time()
        self.sent: list[str] = []

    def send(self, what: str) -> float | None:
        """None: taken; else seconds to retry after."""
        now = asyncio.get_running_loop().time()
        self.level = min(self.burst, self.level + (now - self.at) / self.every)
        self.at = now
        if self.level >= 1:
            self.level -= 1
            self.sent.append(what)
            return None
        return (1 - self.level) * self.every


async def test_gate_orders_a_burst_by_request_and_logs_start_and_end(monkeypatch: pytest.MonkeyPatch) -> None:
    every = 0.05  # a fast limit: one send every 50 ms after a burst of 3
    monkeypatch.setattr(rate, "RESERVE", 1.0)
    monkeypatch.setattr(rate, "EDIT_HOLD", 0.1)
    server = Server(3, every)
    gate = RateGate(bucket=Bucket(per_second=1 / every, burst=3.0))

    async def send(what: str, kind: str, order: float) -> None:
        while True:
            await gate.turn(kind, order)
            wait = server.send(what)
            if wait is None:
                return
            gate.refused(wait)

    with structlog.testing.capture_logs() as logs:
        sends = [send(f"p{i}", PROMPT, float(i)) for i in range(8)]
        sends += [send("k", BACKGROUND, 0.0), send("e2", EDIT, 2.0)]
        await asyncio.gather(*sends)
        assert gate.bucket.limited
        await asyncio.sleep(3 * every + 0.5)
    prompts = [s for s in server.sent if s.startswith("p")]
    assert prompts[3:] == sorted(prompts[3:], key=lambda s: int(s[1:]))  # past the burst: in request order
    assert server.sent[-1] == "k"  # the background send last
    assert server.sent.index("e2") < server.sent.index("p7")
    events = [e["event"] for e in logs]
    assert events.count("matrix_rate_limited_started") == 1 and events.count("matrix_rate_limited_ended") == 1
    ended = next(e for e in logs if e["event"] == "matrix_rate_limited_ended")
    assert ended["refusals"] >= 1 and ended["sends_delayed"] >= 1 and "override_ratelimit" in ended["remedy"]
    status = gate.status()
    assert not status["limited"] and status["limits"] == 1 and status["last"]["refusals"] >= 1
