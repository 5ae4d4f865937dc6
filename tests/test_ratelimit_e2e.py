"""The bot on a homeserver as most run it: Synapse's default message limit on the bot's account.

A burst of 15 requests: the prompts go first (no keycap before the last prompt) and, once the limit paces
them, in the order the requests came (the sends in flight when the homeserver first refused race: one may
win); an answer settles at once (the agent never waits for the homeserver) and its edit is not left behind
the burst; ``/healthz``, the log and ``doctor`` say the account is rate-limited and what fixes it. No timing is
asserted but the order of events; the waits are generous (the limit's floor for 15 prompts is 25 s).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.room.poster import SEND_CONCURRENCY
from tests.support.human import content
from tests.support.limited import limited_station
from tests.support.station import Station, request_body
from tests.test_doctor import doctor, line

pytestmark = pytest.mark.e2e

BURST = 15
PACED_GAP = 3.0  # seconds: the limit's pace is one send every 5 s; the burst before it goes at once


@pytest.fixture(scope="module")
async def limited(tmp_path_factory: pytest.TempPathFactory, synapse_template: Path) -> AsyncIterator[Station]:
    async with limited_station(tmp_path_factory.mktemp("ratelimit"), synapse_template) as st:
        yield st


def _log_lines(path: Path, event: str) -> list[str]:
    return [x for x in path.read_text(errors="replace").splitlines() if event in x]


def _paced(prompts: list[dict[str, Any]]) -> list[int]:
    """The seqs of the prompts the bot's gate let through one at a time: those after the first gap of
    PACED_GAP seconds in the room (before it, the burst the homeserver allowed and the sends already in
    flight when it refused the first; after it, a send every 1/0.2 s, each waiting for its token)."""
    ts = [e["origin_server_ts"] / 1000 for e in prompts]
    first = next((i for i in range(1, len(ts)) if ts[i] - ts[i - 1] >= PACED_GAP), len(ts))
    return [content(e)["request_seq"] for e in prompts[first:]]


async def test_burst_prompts_first_in_order_and_the_operator_told(limited: Station, sid: str) -> None:
    st, alice = limited, limited.alice
    start = alice.mark()
    recs = []
    for i in range(BURST):
        rec = await st.post(request_body(sid, tool_call_id=f"call_{i}"))
        recs.append(rec)
    seqs = [r["request_seq"] for r in recs]

    first = await st.prompt_for(sid, seq=seqs[0], timeout=60)
    assert first, "no first prompt"
    await alice.text("1", reply_to=first["event_id"])
    got = await st.record(recs[0]["id"], wait=60)
    assert got["state"] == "resolved", got
    decided_at = alice.mark()  # settling waited for no send: the burst is still being posted

    last = await st.prompt_for(sid, seq=seqs[-1], timeout=300)
    assert last, "the burst's last prompt never came"
    timeline = alice.events[start:]
    ours = [e for e in timeline if st.is_prompt(e) and content(e).get("session_id") == sid]
    prompts = [content(e)["request_seq"] for e in ours]
    assert sorted(prompts) == seqs, prompts
    where = {seq: at for at, seq in enumerate(prompts)}
    assert all(abs(where[s] - k) < SEND_CONCURRENCY for k, s in enumerate(seqs)), prompts  # the first ones race
    paced = _paced(ours)  # the sends in flight when the first refusal came race each other, and may win
    assert len(paced) >= 3 and paced == sorted(paced) and paced[-1] == seqs[-1], prompts  # paced: the order they came
    last_at = next(i for i, e in enumerate(timeline) if e["event_id"] == last["event_id"])
    assert decided_at - start <= last_at, "the answer was settled only after the whole burst was posted"

    before_last = timeline[:last_at]
    bot_reactions = [e for e in before_last if e.get("sender") == st.bot_id and e.get("type") == "m.reaction"]
    assert not bot_reactions, "a keycap went before a prompt"
    edit = await st.edit_of(first["event_id"], timeout=120)
    assert edit, "the answered prompt was never edited"
    edit_at = next(i for i, e in enumerate(alice.events[start:]) if e["event_id"] == edit["event_id"])
    assert edit_at < last_at, "the answered prompt's edit waited behind the whole burst"

    _, health = await st.ahttp("GET", "/healthz")
    limit = health["rate_limit"]
    assert limit["refusals"] >= 1 and limit["limits"] >= 1, health
    assert "override_ratelimit" in limit["remedy"]
    if limit["limited"]:  # the limit lasts until the bucket is full again (50 s without sends)
        assert health["status"] == "degraded"
        assert any("rate-limits the bot's account" in r and "override_ratelimit" in r for r in health["reasons"])
    started = _log_lines(st.log_path, "matrix_rate_limited_started")
    assert len(started) == 1 and "override_ratelimit" in started[0], started

    _, lines, out = await asyncio.to_thread(doctor, st.config_path)
    assert "override_ratelimit" in line(lines, "WARN rate limit: the running daemon", "rate-limited"), out
