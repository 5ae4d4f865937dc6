"""Two people for the dangerous ones (issue 37), end to end: an ask rule with ``approvals = 2`` over the
HTTP API (the ACP proxy's way in) and the Claude Code hook; answers in the room by reply and reaction."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.demo.homeserver import Homeserver
from tests.agents.raw import RawRun, permission_line
from tests.support.human import content, rel
from tests.support.station import DECIDER_TOKEN, OwnStation, request_body
from tests.test_hooks_e2e import finish, hook_input, start_hook

pytestmark = pytest.mark.e2e
PUSH = "git push --force origin main"
ALICE_OWN = ("alice-own", "test-alice-own-token-1d9e44")  # a decider token that belongs to alice
CAROL_OWN = ("carol-own", "test-carol-own-token-6a3b27")  # and one of carol's, who may not answer


class QuorumStation(OwnStation):
    suffix = "quorum"

    async def setup(self) -> None:
        self.make_people_and_room()
        self.extra_config = (
            '[[rules]]\nmatch = { command = "git push --force*" }\ndecision = "ask"\napprovals = 2\n'
            f'answerers = {{ users = ["{self.alice.user_id}", "{self.bob.user_id}"] }}\n'
        ) + "".join(
            f'\n[[api.tokens]]\nname = "{name}"\nrole = "decider"\nsecret = "{secret}"\nuser = "{who}"\n'
            for (name, secret), who in ((ALICE_OWN, self.alice.user_id), (CAROL_OWN, self.carol.user_id))
        )
        await self.start_all()
        await self.bob.follow()


@pytest.fixture(scope="module")
async def st(homeserver: Homeserver, workdir: Path) -> AsyncIterator[QuorumStation]:
    s = QuorumStation(homeserver, workdir / "quorum")
    await s.setup()
    yield s
    await s.teardown()


async def _progress(st: QuorumStation, prompt_id: str, text: str) -> dict[str, Any]:
    ev = await st.alice.wait(
        lambda e: e.get("sender") == st.bot_id and rel(e).get("rel_type") == "m.replace"
        and rel(e).get("event_id") == prompt_id and text in content(e).get("m.new_content", {}).get("body", ""), 20)
    assert ev, f"the prompt was not edited to show {text!r}"
    return dict(ev)


def _number(prompt: dict[str, Any], meaning: str) -> str:
    shown = content(prompt)["options"]
    return str(next(i for i, o in enumerate(shown, 1) if o.get("meaning") == meaning))


async def test_two_approvers_over_the_api_door(st: QuorumStation, sid: str) -> None:
    rec = await st.post(request_body(sid, command=PUSH))
    assert rec["approvals"] == {"needed": 2, "given": []}, rec
    prompt = await st.prompt_for(sid)
    assert prompt and "Needs 2 approvals: 0 of 2" in content(prompt)["body"]
    mark = len(st.alice.events)
    await st.alice.text("1", reply_to=prompt["event_id"])
    await _progress(st, prompt["event_id"], f"1 of 2: {st.alice.user_id}")
    assert await st.notice_after(mark, contains="Approval counted")
    await st.alice.react(prompt["event_id"], "1\ufe0f\u20e3")  # the same person again: still 1 of 2
    assert await st.notice_after(mark, contains="You approved this already")
    waited = await st.record(rec["id"], wait=1)  # the agent hears nothing yet
    assert waited["state"] == "pending" and [g["by"] for g in waited["approvals"]["given"]] == [
        st.alice.user_id]
    session_line = _number(prompt, "approve")
    await st.bob.text(session_line, reply_to=prompt["event_id"])
    done = await st.record(rec["id"], wait=20)
    assert done["state"] == "resolved" and done["outcome"]["option_id"] == "allow_once", done
    assert [g["by"] for g in done["approvals"]["given"]] == [st.alice.user_id, st.bob.user_id]
    edit = await st.edit_of(prompt["event_id"])
    assert edit
    out = await asyncio.to_thread(st.cli, "audit", "export", "--config", str(st.config_path))
    entry = [json.loads(x) for x in out.stdout.splitlines() if json.loads(x)["request_id"] == rec["id"]]
    assert len(entry) == 1 and entry[0]["answered_by"] == [st.alice.user_id, st.bob.user_id]


async def test_one_reject_after_an_approval_rejects_through_the_hook(st: QuorumStation, sid: str) -> None:
    proc = await start_hook(st, hook_input("claude-code-PermissionRequest-Bash", sid, command=PUSH))
    prompt = await st.prompt_for(sid)
    assert prompt and "Needs 2 approvals" in content(prompt)["body"]
    await st.alice.text(_number(prompt, "approve"), reply_to=prompt["event_id"])
    await _progress(st, prompt["event_id"], "1 of 2")
    assert proc.returncode is None  # the hook waits: nothing settled yet
    await st.bob.text(_number(prompt, "reject"), reply_to=prompt["event_id"])
    code, out, _ = await finish(proc)
    assert code == 0 and out["hookSpecificOutput"]["decision"]["behavior"] == "deny", out


async def test_someone_not_among_its_answerers_changes_nothing(st: QuorumStation, sid: str) -> None:
    rec = await st.post(request_body(sid, command=PUSH))
    prompt = await st.prompt_for(sid)
    assert prompt
    mark = len(st.alice.events)
    await st.carol.follow()
    await st.carol.text("3", reply_to=prompt["event_id"])  # a reject, by someone the rule does not name
    assert await st.notice_after(mark, contains="not on the list")
    code, now = await st.ahttp("GET", f"/permissions/{rec['id']}")
    assert now["state"] == "pending"
    code, got = await st.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "approve"}, token=CAROL_OWN[1])
    assert code == 403 and got["error"] == "not_counted" and "not one of the people" in got["reason"], got
    code, now = await st.ahttp("GET", f"/permissions/{rec['id']}")
    assert now["state"] == "pending" and now["approvals"]["given"] == []
    await st.alice.text("1", reply_to=prompt["event_id"])
    await st.bob.text("1", reply_to=prompt["event_id"])
    done = await st.record(rec["id"], wait=20)
    assert done["state"] == "resolved"


async def _approve_with(st: QuorumStation, rid: str, secret: str) -> subprocess.CompletedProcess[str]:
    """``permission-bot permissions approve`` with the decider token ``secret``."""
    return await asyncio.to_thread(st.cli, "permissions", "approve", rid, env={"PERMISSION_BOT_TOKEN": secret})


async def test_one_person_by_room_and_by_her_own_token_is_one_approval(st: QuorumStation, sid: str) -> None:
    rec = await st.post(request_body(sid, command=PUSH))
    prompt = await st.prompt_for(sid)
    assert prompt
    await st.alice.text("1", reply_to=prompt["event_id"])
    await _progress(st, prompt["event_id"], f"1 of 2: {st.alice.user_id}")
    r = await _approve_with(st, rec["id"], ALICE_OWN[1])  # alice again, through her own token
    assert r.returncode == 0, r.stderr
    _, now = await st.ahttp("GET", f"/permissions/{rec['id']}?wait=1")
    assert now["state"] == "pending" and [g["by"] for g in now["approvals"]["given"]] == [st.alice.user_id], now
    await st.bob.text("1", reply_to=prompt["event_id"])  # the lead: the second person settles it
    done = await st.record(rec["id"], wait=20)
    assert done["state"] == "resolved"
    assert [g["by"] for g in done["approvals"]["given"]] == [st.alice.user_id, st.bob.user_id]


async def test_decider_tokens_of_nobody_never_settle_a_quorum(st: QuorumStation, sid: str) -> None:
    rec = await st.post(request_body(sid, command=PUSH))
    assert await st.prompt_for(sid)
    for secret in (DECIDER_TOKEN[1], st.token):  # a named decider token and the old api.token: no person
        code, got = await st.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "approve"}, token=secret)
        assert code == 403 and got["error"] == "not_counted" and "belongs to no person" in got["reason"], got
    r = await _approve_with(st, rec["id"], DECIDER_TOKEN[1])
    assert r.returncode != 0 and "403" in r.stderr + r.stdout, (r.stdout, r.stderr)
    code, now = await st.ahttp("GET", f"/permissions/{rec['id']}?wait=1")
    assert now["state"] == "pending" and now["approvals"]["given"] == [], now
    code, got = await st.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "deny"}, token=DECIDER_TOKEN[1])
    assert code == 200 and got["state"] == "resolved" and got["outcome"]["option_id"].startswith("reject"), got


async def test_alices_token_and_the_lead_in_the_room_settle_it(st: QuorumStation, sid: str) -> None:
    rec = await st.post(request_body(sid, command=PUSH))
    prompt = await st.prompt_for(sid)
    assert prompt
    r = await _approve_with(st, rec["id"], ALICE_OWN[1])
    assert r.returncode == 0, r.stderr
    await _progress(st, prompt["event_id"], f"1 of 2: {st.alice.user_id}")
    await st.bob.text("1", reply_to=prompt["event_id"])
    done = await st.record(rec["id"], wait=20)
    assert done["state"] == "resolved" and [g["by"] for g in done["approvals"]["given"]] == [
        st.alice.user_id, st.bob.user_id]
    out = await asyncio.to_thread(st.cli, "audit", "export", "--config", str(st.config_path))
    entry = [json.loads(x) for x in out.stdout.splitlines() if json.loads(x)["request_id"] == rec["id"]]
    assert len(entry) == 1 and entry[0]["answered_by"] == [st.alice.user_id, st.bob.user_id]


async def test_through_the_acp_proxy_approved_by_two_and_rejected_by_one(
    st: QuorumStation, sid: str, tmp_path: Path
) -> None:
    agent = await RawRun.start(["--url", st.api_url, "--token", st.token], tmp_path, st.exe)
    try:
        await agent.agent_sends(permission_line(1, sid, title="Push", command=PUSH, tool_call_id="p1"))
        prompt = await st.prompt_for(sid, seq=1)
        assert prompt and "Needs 2 approvals: 0 of 2" in content(prompt)["body"]
        await st.alice.text("1", reply_to=prompt["event_id"])
        await _progress(st, prompt["event_id"], "1 of 2")
        await st.alice.text("1", reply_to=prompt["event_id"])  # alice twice: still 1 of 2
        await asyncio.sleep(1)
        assert not [m for m in agent.agent_json() if m.get("id") == 1 and "method" not in m]  # nothing yet
        await st.bob.text("1", reply_to=prompt["event_id"])
        assert (await agent.agent_reply(1))["result"]["outcome"]["optionId"] == "allow_once"
        await agent.agent_sends(permission_line(2, sid, title="Push again", command=PUSH, tool_call_id="p2"))
        second = await st.prompt_for(sid, seq=2)
        assert second
        await st.alice.text("1", reply_to=second["event_id"])
        await _progress(st, second["event_id"], "1 of 2")
        await st.bob.text(_number(second, "reject"), reply_to=second["event_id"])
        assert (await agent.agent_reply(2))["result"]["outcome"]["optionId"].startswith("reject")
    finally:
        await agent.close()
