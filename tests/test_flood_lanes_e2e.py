"""A model's flood with the agent token alone never starves the token's own front doors: after the token's
budget of pending requests is full of junk (plain ``POST /permissions``), a real request through
``permission-bot acp`` (its claimed session) and a held hook are still posted and answered, against the real
Synapse."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.demo.homeserver import Homeserver
from tests.agents.raw import RawRun, permission_line
from tests.support.human import content
from tests.support.station import OwnStation, request_body
from tests.test_hooks_e2e import finish, hook_input, start_hook

pytestmark = pytest.mark.e2e
CAP = 8


class FloodStation(OwnStation):
    suffix = "flood"


@pytest.fixture(scope="module")
async def st(homeserver: Homeserver, workdir: Path) -> AsyncIterator[FloodStation]:
    s = FloodStation(homeserver, workdir / "flood")
    s.caps = {"max_pending_per_token": CAP, "max_pending_per_session": 20}
    await s.setup()
    yield s
    await s.teardown()


async def _flood(st: FloodStation, sid: str) -> None:
    """The token's budget filled with junk, as a model that read the token would: refused past the cap."""
    codes = [(await st.ahttp("POST", "/permissions", request_body(f"{sid}j{n}", command="junk")))[0]
             for n in range(CAP + 3)]
    assert codes == [201] * CAP + [429] * 3, codes


async def test_the_proxys_request_is_posted_and_answered_under_a_flood(
    st: FloodStation, sid: str, tmp_path: Path
) -> None:
    await _flood(st, sid)
    agent = await RawRun.start(["--url", st.api_url, "--token", st.token], tmp_path, st.exe)
    try:
        await agent.agent_sends(permission_line(1, sid, title="Deploy", command="make deploy"))
        prompt = await st.prompt_for(sid, seq=1, timeout=60)  # generous: never a measure of speed
        assert prompt, "the proxy's request was not posted while the token's budget was full of junk"
        assert "make deploy" in content(prompt)["body"]
        await st.alice.text("1", reply_to=prompt["event_id"])
        assert (await agent.agent_reply(1))["result"]["outcome"]["optionId"] == "allow_once"
    finally:
        await agent.close()
    code, got = await st.ahttp("POST", "/permissions", request_body(f"{sid}late", command="junk"))
    assert code == 429 and got["error"] == "too_many_pending", got  # the token alone: still at its cap


async def test_a_held_hook_is_posted_and_answered_under_a_flood(st: FloodStation, sid: str) -> None:
    code, _ = await st.ahttp("POST", "/permissions", request_body(f"{sid}x", command="junk"))
    if code != 429:  # alone in this run: fill the budget first
        await _flood(st, sid)
    proc = await start_hook(st, hook_input("claude-code-PermissionRequest-Bash", sid, command="make check"))
    prompt = await st.prompt_for(sid, timeout=60)
    assert prompt, "the hook's request was not posted while the token's budget was full of junk"
    await st.alice.text("1", reply_to=prompt["event_id"])
    rc, out, err = await finish(proc, 60)
    assert rc == 0 and out["hookSpecificOutput"]["decision"]["behavior"] == "allow", (out, err)
