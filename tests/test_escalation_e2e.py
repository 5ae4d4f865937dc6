"""Escalation, end to end: a prompt unanswered for ``after`` is escalated once to carol (a page, an
``m.text`` replying to it, mentions her), who may answer it from then on; the clock is the inbox's, so a
daemon restarted in between still escalates it, once. The page notifies: the homeserver's own push rules
make it a highlight in the paged person's ``/notifications``; twenty prompts waiting together make one page
naming them all."""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.demo.homeserver import Homeserver, http
from tests.support.human import Human, content, rel
from tests.support.station import AGENT_B_TOKEN, AGENT_TOKEN, OwnStation, Station, request_body

pytestmark = pytest.mark.e2e
AFTER = 3.0
INFRA_AFTER = 1.0
BATCH_AFTER = 8.0


class EscalationStation(OwnStation):
    """``[escalation]`` to carol after 3 s; the room ``infra`` (agent-b's requests; dave answers; erin and
    carol are members) has its own: to erin after 1 s."""

    suffix = "esc"

    async def setup(self) -> None:
        self.make_people_and_room()
        self.dave, self.erin = Human(self.hs, "daveesc"), Human(self.hs, "erinesc")
        self.infra_id = self.hs.create_room(
            self.dave.token, invite=[self.bot_id, self.erin.user_id, self.carol.user_id], name="infra"
        )
        self.hs.join(self.erin.token, self.infra_id)
        self.hs.join(self.carol.token, self.infra_id)
        self.oscar = Human(self.hs, "oscaresc")
        self.batch_id = self.hs.create_room(self.dave.token, invite=[self.bot_id, self.oscar.user_id], name="batch")
        self.hs.join(self.oscar.token, self.batch_id)
        await self.dave.start(self.infra_id)
        await self.erin.start(self.infra_id, follow=False)
        await self.oscar.start(self.batch_id)
        self.extra_config = (
            f'[escalation]\nafter = "{int(AFTER)}s"\nmention = ["{self.carol.user_id}"]\n'
            f'[[rooms]]\nname = "infra"\nroom = "{self.infra_id}"\n'
            f'answerers = {{ users = ["{self.dave.user_id}"] }}\ntokens = ["{AGENT_B_TOKEN[0]}"]\n'
            f'escalation = {{ after = "{int(INFRA_AFTER)}s", mention = ["{self.erin.user_id}"] }}\n'
            f'[[rooms]]\nname = "batch"\nroom = "{self.batch_id}"\n'
            f'answerers = {{ users = ["{self.dave.user_id}"] }}\ntokens = ["{AGENT_TOKEN[0]}"]\n'
            f'escalation = {{ after = "{int(BATCH_AFTER)}s", mention = ["{self.oscar.user_id}"] }}\n'
        )
        await self.start_all()
        await self.carol.follow()

    async def teardown(self) -> None:
        for h in (self.dave, self.erin, self.oscar):
            await h.close()
        await super().teardown()


@pytest.fixture(scope="module")
async def st(homeserver: Homeserver, workdir: Path) -> AsyncIterator[EscalationStation]:
    s = EscalationStation(homeserver, workdir / "escalation")
    await s.setup()
    yield s
    await s.teardown()


def _is_page(st: Station, e: dict[str, Any], to: str = "") -> bool:
    """The bot's page: an m.text (an m.notice notifies nobody) mentioning ``to``."""
    return bool(e.get("sender") == st.bot_id and content(e).get("msgtype") == "m.text"
                and (to or st.carol.user_id) in (content(e).get("m.mentions") or {}).get("user_ids", []))


def _is_escalation(st: Station, e: dict[str, Any], prompt_id: str, to: str = "") -> bool:
    """A page naming the prompt (a page of one also replies to it)."""
    return _is_page(st, e, to) and urllib.parse.quote(prompt_id, safe="$:") in content(e).get("body", "")


def _escalations(st: Station, prompt_id: str) -> list[dict[str, Any]]:
    return st.alice.find(lambda e: _is_escalation(st, e, prompt_id))


async def _escalated(st: EscalationStation, prompt_id: str) -> dict[str, Any]:
    ev = await st.alice.wait(lambda e: _is_escalation(st, e, prompt_id), AFTER + 20)
    assert ev, "no escalation notice"
    return ev


async def test_carol_answers_once_it_was_escalated(st: EscalationStation, sid: str) -> None:
    rec = await st.post(request_body(sid))
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
    rec = await st.post(request_body(sid))
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


async def test_a_room_with_its_own_escalation_uses_it(st: EscalationStation, sid: str) -> None:
    """infra's prompt is escalated to erin after 1 s (its own setting), not to carol; erin may answer it,
    carol (the global one's) may not; the default room's prompt, asked at the same time, goes by [escalation]."""
    infra = await st.post(request_body(sid + "i"), token=AGENT_B_TOKEN[1])
    assert infra["room"] == "infra", infra
    plain = await st.post(request_body(sid + "d"))
    assert plain["room"] == "default", plain
    prompt = await st.prompt_for(sid + "i", human=st.dave)
    assert prompt
    note = await st.dave.wait(lambda e: _is_escalation(st, e, prompt["event_id"], st.erin.user_id), INFRA_AFTER + 20)
    assert note, "infra's prompt was not escalated to erin"
    assert content(note)["m.mentions"]["user_ids"] == [st.erin.user_id] and "waited 1s" in content(note)["body"]
    _, now = await st.ahttp("GET", f"/permissions/{infra['id']}")
    assert now["state"] == "pending" and now["escalated_at"], now
    mark = len(st.dave.events)
    r = await st.carol.client.room_send(st.infra_id, "m.room.message", {  # carol: [escalation]'s, not infra's
        "msgtype": "m.text", "body": "1", "m.relates_to": {"m.in_reply_to": {"event_id": prompt["event_id"]}}})
    assert hasattr(r, "event_id"), r
    assert await st.notice_after(mark, human=st.dave, contains="not on the list")
    await st.erin.text("1", reply_to=prompt["event_id"])
    done = await st.record(infra["id"], wait=20)
    assert done["state"] == "resolved" and done["outcome"]["answered_by"] == st.erin.user_id, done
    default_prompt = await st.prompt_for(sid + "d")
    assert default_prompt
    esc = await _escalated(st, default_prompt["event_id"])  # the default room: carol, after 3 s
    assert "waited 3s" in content(esc)["body"] and st.erin.user_id not in content(esc)["m.mentions"]["user_ids"]
    await st.ahttp("POST", f"/permissions/{plain['id']}", {"decision": "approve"})


def _highlights(hs: Homeserver, token: str) -> set[str]:
    """The event ids the homeserver's push rules made a highlight for this user (``/notifications``)."""
    got = http("GET", f"{hs.url}/_matrix/client/v3/notifications?limit=100", token=token)
    return {n["event"]["event_id"] for n in got.get("notifications", [])
            if any(isinstance(a, dict) and a.get("set_tweak") == "highlight" and a.get("value", True)
                   for a in n.get("actions", []))}


async def test_twenty_prompts_waiting_make_one_page_that_rings(st: EscalationStation, sid: str) -> None:
    """One agent token's twenty requests at once: one page in their room naming every one of them, and it is
    a highlight in oscar's notifications (the homeserver's default push rules, not the bot, decide)."""
    got = await asyncio.gather(*(st.ahttp("POST", "/permissions", request_body(f"{sid}{i}"), token=AGENT_TOKEN[1])
                                 for i in range(20)))
    assert all(code == 201 and rec["room"] == "batch" for code, rec in got), got
    prompts = [await st.prompt_for(f"{sid}{i}", human=st.oscar) for i in range(20)]
    assert all(prompts)
    links = [urllib.parse.quote(p["event_id"], safe="$:") for p in prompts if p]
    page = await st.oscar.wait(lambda e: _is_page(st, e, st.oscar.user_id), BATCH_AFTER + 30)
    assert page, "no page"
    await asyncio.sleep(BATCH_AFTER + 3)  # a second page would be in the room by now
    pages = st.oscar.find(lambda e: _is_page(st, e, st.oscar.user_id))
    assert len(pages) == 1, [content(p)["body"][:200] for p in pages]
    body = content(page)["body"]
    assert body.startswith(f"{st.oscar.user_id}: 20 prompts (20 permission requests) have waited 8s"), body
    assert all(link in body for link in links), body
    for _, rec in got:
        _, now = await st.ahttp("GET", f"/permissions/{rec['id']}")
        assert now["escalated_at"], now
    highlights: set[str] = set()
    for _ in range(40):
        highlights = await asyncio.to_thread(_highlights, st.hs, st.oscar.token)
        if page["event_id"] in highlights:
            break
        await asyncio.sleep(0.5)
    assert page["event_id"] in highlights, highlights
    for _, rec in got:
        await st.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "cancel"})
