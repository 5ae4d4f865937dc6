"""Escalation (issue 37), end to end: a prompt unanswered for ``after`` is escalated once to carol (a notice
replying to it mentions her), who may answer it from then on; the clock is the inbox's, so a daemon
restarted in between still escalates it, once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.demo.homeserver import Homeserver
from tests.support.human import content, rel
from tests.support.station import OwnStation, Station, request_body

pytestmark = pytest.mark.e2e
AFTER = 3.0


class EscalationStation(OwnStation):
    suffix = "esc"

    async def setup(self) -> None:
        self.make_people_and_room()
        self.extra_config = f'[escalation]\nafter = "{int(AFTER)}s"\nmention = ["{self.carol.user_id}"]\n'
        await self.start_all()
        await self.carol.follow()


@pytest.fixture(scope="module")
async def st(homeserver: Homeserver, workdir: Path) -> AsyncIterator[EscalationStation]:
    s = EscalationStation(homeserver, workdir / "escalation")
    await s.setup()
    yield s
    await s.teardown()


def _is_escalation(st: Station, e: dict[str, Any], prompt_id: str) -> bool:
    return bool(e.get("sender") == st.bot_id and content(e).get("msgtype") == "m.notice"
                and st.carol.user_id in (content(e).get("m.mentions") or {}).get("user_ids", [])
                and (rel(e).get("m.in_reply_to") or {}).get("event_id") == prompt_id)


def _escalations(st: Station, prompt_id: str) -> list[dict[str, Any]]:
    return st.alice.find(lambda e: _is_escalation(st, e, prompt_id))


async def _escalated(st: EscalationStation, prompt_id: str) -> dict[str, Any]:
    ev = await st.alice.wait(lambda e: _is_escalation(st, e, prompt_id), AFTER + 20)
    assert ev, "no escalation notice"
    return ev


async def test_carol_answers_once_it_was_escalated(st: EscalationStation, sid: str) -> None:
    code, rec = await st.ahttp("POST", "/permissions", request_body(sid))
    assert code == 201
    prompt = await st.prompt_for(sid)
    assert prompt
    mark = len(st.alice.events)
    await st.carol.text("1", reply_to=prompt["event_id"])  # not an answerer, not escalated yet: nothing
    assert await st.notice_after(mark, contains="not on the list")
    note = await _escalated(st, prompt["event_id"])
    assert "waited 3s" in content(note)["body"]
    edit = await st.alice.wait(
        lambda e: e.get("sender") == st.bot_id and rel(e).get("rel_type") == "m.replace"
        and rel(e).get("event_id") == prompt["event_id"]
        and "Escalated to" in content(e).get("m.new_content", {}).get("body", ""), 20)
    assert edit, "the prompt does not say it was escalated"
    _, now = await st.ahttp("GET", f"/permissions/{rec['id']}")
    assert now["state"] == "pending" and now["escalated_at"]
    await st.carol.text("1", reply_to=prompt["event_id"])
    done = await st.record(rec["id"], wait=20)
    assert done["state"] == "resolved" and done["outcome"]["answered_by"] == st.carol.user_id
    await asyncio.sleep(1)
    assert len(_escalations(st, prompt["event_id"])) == 1


async def test_an_escalation_survives_a_restart(st: EscalationStation, sid: str) -> None:
    code, rec = await st.ahttp("POST", "/permissions", request_body(sid))
    assert code == 201
    prompt = await st.prompt_for(sid)
    assert prompt
    st.stop_daemon()  # before it is due: the next daemon finds it due from the inbox's clock
    await asyncio.sleep(AFTER)
    st.start_daemon()
    await st.wait_healthy()
    await _escalated(st, prompt["event_id"])
    await st.carol.text("1", reply_to=prompt["event_id"])
    done = await st.record(rec["id"], wait=20)
    assert done["state"] == "resolved" and done["outcome"]["answered_by"] == st.carol.user_id
    await st.restart_daemon()
    await asyncio.sleep(1.5)
    assert len(_escalations(st, prompt["event_id"])) == 1  # once, whatever restarts
