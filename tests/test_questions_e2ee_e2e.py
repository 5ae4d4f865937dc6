"""Questions in an encrypted station room (issue 33), against the real Synapse: the person answering is
matrix-js-sdk with its Rust crypto (the engine under Element, tests/js/human.mjs) on a cross-signed device, under
the default trust = "cross-signed". The question prompts reach that device encrypted, valid and without a
warning; its encrypted answers (a number, several numbers, its own words as a reply, a structured answer naming
several choices) settle them, and the hook gets exactly the answers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.answers import ANSWER_KEY
from bot.demo.homeserver import Homeserver
from bot.events import validate_content
from tests.support.station import AGENT_TOKEN
from tests.test_cross_signing_e2e import XSStation
from tests.test_questions_e2e import Q1, Q2, answered, hook_input

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
async def xs(homeserver: Homeserver, workdir: Path) -> AsyncIterator[XSStation]:
    st = XSStation(homeserver, workdir / "q-e2ee", "qjs", trust="cross-signed")
    await st.setup()
    yield st
    await st.teardown()


async def ask(xs: XSStation, sid: str, first_seq: int) -> tuple[dict[str, Any], asyncio.Future[Any], list[Any]]:
    """The hook asks the two-question form; both prompts as her js-sdk device decrypted them."""
    data = hook_input("hook-PermissionRequest-AskUserQuestion", sid)
    call = asyncio.ensure_future(xs.ahttp("POST", "/hooks/claude-code", data, token=AGENT_TOKEN[1]))
    prompts = [await xs.js_prompt(sid, seq) for seq in (first_seq, first_seq + 1)]
    for p in prompts:
        assert p["encrypted"] and p["shield"] == 0, p  # EventShieldColour.NONE: no warning
        validate_content(p["content"])
        assert p["content"]["tool_kind"] == "question"
    return data, call, prompts


async def test_matrix_js_sdk_answers_questions_in_an_encrypted_room(xs: XSStation, sid: str) -> None:
    data, call, (first, second) = await ask(xs, sid, 1)
    await xs.js_answer("1", first["event_id"])  # one choice, by number
    await xs.js_answer("1 2", second["event_id"])  # a multi-select, by several numbers
    status, out = await asyncio.wait_for(call, 30)
    assert status == 200 and out == answered(data, {Q1: "Postgres", Q2: "Docker, CI"})
    edit = await xs.js.call("wait_event", name="alice", room=xs.room_id, sender=xs.bot_id, timeout=20,
                            body="☑️ Answered: Docker, CI by " + xs.alice.user_id)
    assert edit["event_id"] and edit["encrypted"], "her device never read the settled prompt"

    data, call, (first, second) = await ask(xs, sid, 3)
    await xs.js_answer("MySQL, please", first["event_id"])  # her own words, as a reply
    c = second["content"]
    structured = {ANSWER_KEY: {"request_id": c["request_id"], "option_ids": ["Docs", "Docker"],
                               "subject": {"digest": c["subject"]["digest"], "revision": c["subject"]["revision"]}}}
    await xs.js.call("send", name="alice", room=xs.room_id, body="Docker, Docs", reply_to=second["event_id"],
                     extra=structured)
    status, out = await asyncio.wait_for(call, 30)
    assert status == 200 and out == answered(data, {Q1: "MySQL, please", Q2: "Docker, Docs"})
    _, rec = await xs.ahttp("GET", f"/permissions/{c['request_id']}")
    assert rec["outcome"]["via"] == "structured" and rec["outcome"]["chosen"] == ["Docker", "Docs"]
