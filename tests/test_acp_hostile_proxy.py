"""A hostile or unlucky agent against the in-process stand-in for the daemon: cancels that lose the race
to an answer (the agent gets the answer the record holds, before the cancel), withdrawals, batches."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.agents.raw import RawRun, permission_line
from tests.test_acp_proxy import FakeDaemon, flags


@pytest.fixture
async def fake() -> AsyncIterator[FakeDaemon]:
    d = FakeDaemon()
    await d.start()
    yield d
    await d.stop()


def cancel(sid: str) -> str:
    return json.dumps({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})


async def test_answer_first_reaches_the_agent_before_the_cancel(fake: FakeDaemon, tmp_path: Path) -> None:
    r = await RawRun.start(flags(fake), tmp_path)
    try:
        for i in range(8):
            lose = i % 2 == 0  # every other round a person answers just before the cancel arrives
            if lose:
                fake.answer_first.append("allow_once")
            await r.agent_sends(permission_line(i, "s", tool_call_id=f"c{i}"))
            await fake.wait_for(lambda n=i: len(fake.records) == n + 1 and fake.records[f"s:{n + 1}"])
            await fake.wait_pending()
            await r.send(cancel("s"))
            reply = (await r.agent_reply(i))["result"]["outcome"]
            rec = fake.records[f"s:{i + 1}"]
            if lose:
                assert reply == {"outcome": "selected", "optionId": "allow_once"}
                assert rec["state"] == "resolved" and rec["outcome"]["answered_by"] == "@alice:hs"
            else:
                assert reply == {"outcome": "cancelled"} and rec["state"] == "cancelled"
            await r.wait(lambda n=i: sum(b'"session/cancel"' in x for x in r.agent_lines()) > n,
                         what="the cancel relayed to the agent")
            lines = r.agent_lines()
            answer_at = next(j for j, x in enumerate(lines) if json.loads(x).get("id") == i and b"method" not in x)
            cancel_at = [j for j, x in enumerate(lines) if b'"session/cancel"' in x][i]
            assert answer_at < cancel_at, lines
    finally:
        await r.close()


async def test_client_leaving_after_an_answer_gives_the_agent_that_answer(fake: FakeDaemon, tmp_path: Path) -> None:
    r = await RawRun.start(flags(fake), tmp_path)
    fake.answer_first.append("reject_once")
    await r.agent_sends(permission_line(1, "s"))
    await fake.wait_pending()
    assert r.proc.stdin is not None
    r.proc.stdin.close()  # the client goes away
    reply = (await r.agent_reply(1))["result"]["outcome"]
    assert reply == {"outcome": "selected", "optionId": "reject_once"}
    assert fake.records["s:1"]["state"] == "resolved"
    await r.close()


async def test_withdrawn_request_is_cancelled_with_the_reason(fake: FakeDaemon, tmp_path: Path) -> None:
    r = await RawRun.start(flags(fake), tmp_path)
    try:
        await r.agent_sends(permission_line("w1", "s"))
        await fake.wait_pending()
        await r.agent_sends(json.dumps({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "w1"}}))
        reply = await r.agent_reply("w1")
        assert reply["error"]["code"] == -32800
        assert ("s:1", {"decision": "cancel", "by": "agent", "feedback": "withdrawn by the agent"}) in fake.decisions
        # a $/cancel_request for an id of the same value but another type is not ours: it goes to the client
        await r.agent_sends('{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}')
        await r.wait(lambda: any(b"cancel_request" in x for x in r.client_lines), what="relayed cancel_request")
    finally:
        await r.close()


async def test_a_batch_cannot_smuggle_a_permission_request_past_the_bot(fake: FakeDaemon, tmp_path: Path) -> None:
    r = await RawRun.start(flags(fake), tmp_path)
    try:
        note = {"jsonrpc": "2.0", "method": "_x/note", "params": {}}
        batch = [json.loads(permission_line(5, "s", title="Batched")), note]
        await r.agent_sends(json.dumps(batch))
        (rec,) = await fake.wait_pending()
        assert rec["params"]["toolCall"]["title"] == "Batched"
        await r.wait(lambda: r.client_lines, what="the rest of the batch at the client")
        assert [json.loads(x) for x in r.client_lines] == [[note]]
        await fake.settle(rec["id"], "allow_once")
        assert (await r.agent_reply(5))["result"]["outcome"]["optionId"] == "allow_once"
    finally:
        await r.close()
