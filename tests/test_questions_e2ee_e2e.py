"""Questions in an encrypted station room (issue 33), against the real Synapse: the question prompt goes out
encrypted and valid, an encrypted reply answers it, and the hook gets exactly the answers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.demo.homeserver import Homeserver
from bot.events import validate_content
from tests.support.e2e_human import E2EStation
from tests.support.human import content
from tests.support.station import AGENT_TOKEN
from tests.test_questions_e2e import Q1, Q2, answered, hook_input

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
async def e2ee(homeserver: Homeserver, workdir: Path) -> AsyncIterator[E2EStation]:
    st = E2EStation(homeserver, workdir / "q-e2ee", "q-e2ee")
    await st.setup()
    yield st
    await st.teardown()


async def test_an_encrypted_room_answers_a_question_form(e2ee: E2EStation, sid: str) -> None:
    data = hook_input("hook-PermissionRequest-AskUserQuestion", sid)
    call = asyncio.ensure_future(e2ee.ahttp("POST", "/hooks/claude-code", data, token=AGENT_TOKEN[1]))
    first = await e2ee.prompt_for(sid, seq=1)
    second = await e2ee.prompt_for(sid, seq=2)
    assert first and second, "no decrypted prompts"
    for p in (first, second):
        validate_content(content(p))
        wire = await e2ee.carol.wait(lambda e, p=p: e.get("event_id") == p["event_id"], 10)
        assert (wire or {}).get("type") == "m.room.encrypted"
    assert content(first)["tool_kind"] == "question"
    await e2ee.alice.text("Postgres", reply_to=first["event_id"])
    await e2ee.alice.text("1 2", reply_to=second["event_id"])
    status, out = await asyncio.wait_for(call, 30)
    assert status == 200 and out == answered(data, {Q1: "Postgres", Q2: "Docker, CI"})
