"""Invariant 1 (issue 24), the pure parts: a key names one body; proxy keys are a per-run secret;
ending a run's rules needs a key that run used; a client takes only the record it sent."""

from __future__ import annotations

import re
from typing import Any

import pytest

from bot.acp.proxy import Proxy
from bot.door.config import ProxyConfig
from bot.door.daemon_client import WrongRecord, _checked
from bot.inbox.session_rule_store import SessionRules
from bot.inbox.session_rules import origin_of, scope_of
from bot.inbox.store import Inbox
from bot.inbox.submission import KeyConflict, conflict, parse_submission
from bot.util.digest import submission_digest
from tests.support.station import request_body

KEY = "0123456789abcdef0123456789abcdef:2"


def body(**change: Any) -> dict[str, Any]:
    b = request_body("s", key=KEY)
    b.update(change)
    return b


async def test_the_same_body_again_is_the_same_record(inbox: Inbox) -> None:
    r1, c1 = await inbox.submit(parse_submission(body()), 1.0, 60)
    r2, c2 = await inbox.submit(parse_submission(body()), 2.0, 60)
    assert c1 and not c2 and r1 == r2
    assert conflict(parse_submission(body()), r1) is None


@pytest.mark.parametrize(
    ("change", "what"),
    [
        ({"toolCall": {**request_body("s")["toolCall"], "rawInput": {"command": "curl x | sh"}}}, "the params"),
        ({"options": [{"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"}]}, "the params"),
        ({"label": "another-agent"}, "label"),
        ({"cwd": "/home/alice"}, "cwd"),
        # the context fills what the tool call leaves out: a squatter's context changes what is shown
        ({"toolCall": {"toolCallId": "call_1"}, "toolCallContext": {"title": "Run the linter"}}, "the params"),
    ],
)
async def test_a_used_key_with_another_body_is_a_conflict_and_the_stored_record_stays(
    inbox: Inbox, change: dict[str, Any], what: str
) -> None:
    first, _ = await inbox.submit(parse_submission(body()), 1.0, 60)
    other = parse_submission(body(**change))
    with pytest.raises(KeyConflict, match=re.escape(f"({what} differs)")):
        await inbox.submit(other, 2.0, 60)
    assert await inbox.get(first.id) == first
    assert await inbox.get("s:2") is None  # nothing stored, no number used


async def test_only_what_the_context_shows_is_compared(inbox: Inbox) -> None:
    """Two sparse tool calls completed differently by ``toolCallContext`` are two bodies."""
    sparse = {"toolCallId": "call_9"}
    a = body(toolCall=sparse, toolCallContext={"title": "Run the tests", "rawInput": {"command": "bun test"}})
    b = body(toolCall=sparse, toolCallContext={"title": "Run the tests", "rawInput": {"command": "rm -rf ~"}})
    rec, _ = await inbox.submit(parse_submission(a), 1.0, 60)
    assert conflict(parse_submission(a), rec) is None
    assert conflict(parse_submission(b), rec) == "key: already used for another body (raw_input differs)"


def test_proxy_keys_carry_a_128_bit_secret_origin() -> None:
    p, q = Proxy(ProxyConfig(command=["true"])), Proxy(ProxyConfig(command=["true"]))
    assert re.fullmatch(r"[0-9a-f]{32}", p.proxy_id) and p.proxy_id != q.proxy_id
    assert origin_of(f"{p.proxy_id}:7") == p.proxy_id
    assert origin_of("0123456789abcdef:7") is None  # the old, guessable 16-hex origins no longer match
    assert p.proxy_id not in p.fwd_id  # the id a forwarded request shows the client is not the secret


async def test_ending_rules_needs_a_key_the_same_token_used(inbox: Inbox) -> None:
    store = SessionRules(inbox)
    rec, _ = await inbox.submit(parse_submission(body(toolCall={
        **request_body("s")["toolCall"], "_meta": {"claudeCode": {"toolName": "Bash"}}})), 1.0, 60, "agent-a")
    scope = scope_of({"key": rec.key, "session_id": "s", "tool_name": "Bash", "raw_input": rec.raw_input,
                      "tool_kind": rec.tool_kind, "title": rec.title})
    assert scope is not None
    await store.add(scope, set_by="@alice:hs", request_id=rec.id, now=2.0)
    origin = KEY.partition(":")[0]
    assert await store.end_by_key(f"{origin}:99", "agent-a") is None  # the origin alone proves nothing
    assert await store.end_by_key(KEY, "agent-b") is None  # another token that learnt the key
    assert await store.end_by_key(KEY, "agent-a", "other-session") is None  # not a request of that session
    assert await store.end_by_key("agent-picked", "agent-a") is None
    assert len(await store.list()) == 1
    assert await store.end_by_key(KEY, "agent-a", "s") == 1
    assert await store.list() == []


def test_a_client_takes_only_the_record_of_what_it_sent() -> None:
    sent = body()
    digest = submission_digest(sent)
    assert digest is not None and digest == parse_submission(sent).digest  # the daemon's digest, recomputed
    mine = {"id": "s:1", "digest": digest}
    assert _checked(mine, digest) is mine
    for wrong in ({"id": "s:1", "digest": "0" * 64}, {"id": "s:1"}):
        with pytest.raises(WrongRecord):
            _checked(wrong, digest)
    with pytest.raises(WrongRecord):
        _checked(mine, "")  # a body the client cannot digest matches no record
    assert submission_digest({"x": float("nan")}) is None
