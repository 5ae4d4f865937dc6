"""What an agent's option really does, through ``permission-bot acp`` in the real Synapse: the tests' byte-level
agent replays the real requests (tests/fixtures/agents/: Codex, Gemini CLI, Qwen Code)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.agents.raw import RawRun
from tests.support.human import content
from tests.test_acp_elicitation_e2e import answer, raw, wait_prompts
from tests.test_qwen_asks_e2e import qwen, request_line

pytestmark = pytest.mark.e2e


@pytest.fixture
async def run(station: Any, tmp_path: Path) -> AsyncIterator[RawRun]:
    proxy = await raw(station, tmp_path)
    yield proxy
    await proxy.close()


async def test_codex_abort_with_feedback_tells_the_person_it_is_dropped(
    station: Any, run: RawRun, sid: str
) -> None:
    await run.agent_sends(request_line("05bb048a-codex", qwen("codex-exec", sid)))
    (p,) = await wait_prompts(station, sid, 1)
    body = p["content"]["body"]
    assert "2. Yes, and don't ask again" in body and "every later session" in body
    mark = station.alice.mark()
    await answer(station, p, "3 - write it under /tmp instead")
    got = await run.agent_reply("05bb048a-codex")
    assert got["result"]["outcome"] == {"outcome": "selected", "optionId": "abort"}
    notice = await station.notice_after(mark, contains="Codex gets no feedback")
    assert notice, "the person is told their words did not reach Codex"


async def test_gemini_and_qwen_option_1_and_one_session_line(station: Any, run: RawRun, sid: str) -> None:
    await run.agent_sends(request_line(0, qwen("gemini-shell", sid)))
    (p,) = await wait_prompts(station, sid, 1)
    body = p["content"]["body"]
    assert "1. Allow\n2. Allow for this session\n3. Reject\n" in body and "(this command)" not in body
    await answer(station, p, "s")  # the agent's own session option: the one line of that name
    assert (await run.agent_reply(0))["result"]["outcome"]["optionId"] == "proceed_always"
    await run.agent_sends(request_line(1, qwen("qwen-shell", sid)))
    p = (await wait_prompts(station, sid, 2))[-1]
    c = content(p)
    assert c["body"].count("Always Allow") == 2 and "scope: this project" in c["body"]
    await answer(station, p, "1")
    assert (await run.agent_reply(1))["result"]["outcome"]["optionId"] == "proceed_once"
