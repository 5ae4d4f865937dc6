"""Issue 35 end to end on the in-process fake homeserver (the daemon whole, only its homeserver fake, its sends
slowed to make a backlog): a new request is never hidden behind a backlog; a rule-settled request is posted
settled in one event and binds nothing; a request settled while its prompt was on its way is edited at once;
an unbound plain answer never reads every pending request."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_station import FakeStation, until
from tests.support.fakematrix import FakeHomeserver
from tests.support.human import content
from tests.support.station import request_body

SEND = 0.02  # seconds the fake homeserver takes per event of the room (one after another): 50 a second


@pytest.fixture
async def slow(tmp_path: Path) -> AsyncIterator[FakeStation]:
    hs = await FakeHomeserver(send_latency=SEND).start()
    st = FakeStation(hs, tmp_path / "state")
    st.prompts["seed_reactions"] = False  # only prompts and edits in the room: counts stay simple
    await st.start()
    yield st
    if st.daemon is not None:
        await st.stop()
    await hs.close()


def posted(st: FakeStation) -> int:
    return sum(1 for e in st.bot_events() if content(e).get("suite_event_type") and "m.new_content" not in content(e))


async def test_a_new_request_is_posted_ahead_of_a_backlog(slow: FakeStation) -> None:
    """300 requests at once (six seconds of sends), then one more: it is in the room within a second or two,
    while most of the backlog still waits; the backlog drains from its oldest end too."""
    n = 300
    await asyncio.gather(*(slow.d.submit(request_body(f"b{i}"), "api.token") for i in range(n)))
    t0 = time.monotonic()
    await slow.d.submit(request_body("now"), "api.token")
    await until(lambda: slow.prompts_of("now"), timeout=5, what="the new request's prompt")
    waited = time.monotonic() - t0
    assert waited < 2.0, f"the new request waited {waited:.2f} s behind the backlog"
    assert posted(slow) < n // 2, "the backlog was posted first"
    await until(lambda: slow.prompts_of("b0"), timeout=2, what="the backlog's oldest, on its side")
    assert posted(slow) < n // 2


async def test_a_rule_settled_request_is_one_settled_event_and_binds_nothing(tmp_path: Path) -> None:
    hs = await FakeHomeserver().start()
    st = FakeStation(hs, tmp_path / "state")
    st.rules = [{"match": {"toolName": "Read*"}, "decision": "approve"}]
    await st.start()
    try:
        pending, b_prompt = await st.submit(request_body("ask"))  # B: posted, pending
        body = request_body("ruled", title="Read README.md", kind="read", command="cat README.md")
        body["toolCall"]["_meta"] = {"claudeCode": {"toolName": "Read"}}
        t0 = time.monotonic()
        rec, prompt = await st.submit(body)
        assert time.monotonic() - t0 < 2.0
        assert rec.outcome is not None and rec.outcome.via == "rule"
        c = content(prompt)
        assert c["resolution"]["via"] == "rule" and c["resolution"]["option_id"] == "allow_once", c
        assert "Reply with" not in c["body"]
        stored = await st.d.inbox.get(rec.id)
        assert stored is not None and stored.prompt_edited and stored.prompt_event_id == prompt["event_id"]
        # B was posted before the settled event: a plain "1" now is asked about (something came between),
        # never taken for the settled one; a reply still answers B
        mark = st.mark()
        st.text(st.alice, "1")
        await until(lambda: st.notices(mark, "Which request do you mean?"), what="the bot asks which")
        assert (await st.d.inbox.get(pending.id)).pending  # type: ignore[union-attr]
        st.text(st.alice, "1", reply_to=b_prompt["event_id"])
        assert (await st.settled(pending.id)).outcome is not None
        later, _ = await st.submit(request_body("next"))
        st.text(st.alice, "1")  # the one open prompt just above: C
        assert (await st.settled(later.id)).outcome is not None
        assert st.edits_of(prompt["event_id"]) == [], "a prompt posted settled is never edited"
        assert len([e for e in st.bot_events() if content(e).get("request_id") == rec.id]) == 1
    finally:
        await st.stop()
        await hs.close()


async def test_a_request_settled_while_its_prompt_is_sent_is_edited_at_once(tmp_path: Path) -> None:
    hs = await FakeHomeserver(send_latency=0.3).start()
    st = FakeStation(hs, tmp_path / "state")
    await st.start()
    try:
        rec, _ = await st.d.submit(request_body("race"), "api.token")
        await asyncio.sleep(0.1)  # its prompt is on its way
        await st.d.decide(rec.id, "deny", by="api:test")
        t0 = time.monotonic()
        prompt = (await until(lambda: st.prompts_of("race"), what="the prompt"))[0]
        await until(lambda: st.edits_of(prompt["event_id"]), timeout=3, what="the edit (not the 10 s idle timer)")
        assert time.monotonic() - t0 < 3.0
    finally:
        await st.stop()
        await hs.close()


async def test_an_unbound_plain_answer_never_reads_every_pending_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hs = await FakeHomeserver().start()
    st = FakeStation(hs, tmp_path / "state")
    await st.start()
    try:
        async def everything(*_a: Any, **_k: Any) -> Any:
            raise AssertionError("a plain answer read every pending request")

        monkeypatch.setattr(st.d.inbox, "pending", everything)
        for i in range(3):
            await st.submit(request_body(f"p{i}"))
        mark = st.mark()
        st.text(st.alice, "2")
        notice = await until(lambda: st.notices(mark, "Which request do you mean?"), what="the bot asks which")
        assert "3 requests are waiting (p2:1, p1:1, p0:1)" in content(notice[0])["body"]  # the newest first
    finally:
        await st.stop()
        await hs.close()
