"""The tool-call cache that completes sparse permission requests, and the outcome mapping."""

from __future__ import annotations

from typing import Any

from bot.acp.toolcalls import CONTEXT_BYTES, ToolCallCache
from bot.door.outcomes import reject_result, result_from_record


def upd(what: str, sid: str = "s1", **fields: Any) -> dict[str, Any]:
    return {"sessionId": sid, "update": {"sessionUpdate": what, **fields}}


def test_sparse_request_is_completed_from_announcement_and_updates() -> None:
    c = ToolCallCache()
    c.observe(
        upd(
            "tool_call",
            toolCallId="c1",
            title="Run tests",
            kind="execute",
            status="pending",
            rawInput={"command": "bun test"},
            locations=[{"path": "apps/hub"}],
        )
    )
    c.observe(
        upd(
            "tool_call_update",
            toolCallId="c1",
            title="Run the test suite",
            status="in_progress",
            content=[{"type": "content", "content": {"type": "text", "text": "hi"}}],
        )
    )
    c.observe(upd("agent_message_chunk", content={"type": "text", "text": "x"}))
    ctx = c.completion("s1", {"toolCallId": "c1"})
    assert ctx == {
        "title": "Run the test suite",
        "kind": "execute",
        "rawInput": {"command": "bun test"},
        "locations": [{"path": "apps/hub"}],
        "content": [{"type": "content", "content": {"type": "text", "text": "hi"}}],
    }
    # only what the request lacks (missing, null or empty) is supplied
    ctx = c.completion("s1", {"toolCallId": "c1", "title": "Mine", "kind": None, "locations": []})
    assert ctx is not None and "title" not in ctx and ctx["kind"] == "execute" and ctx["locations"]
    full = {"toolCallId": "c1", "title": "t", "kind": "read", "rawInput": {}, "content": [1], "locations": [2]}
    assert c.completion("s1", {**full, "rawInput": {"a": 1}}) is None


def test_sessions_and_calls_are_kept_apart_and_a_new_announcement_starts_afresh() -> None:
    c = ToolCallCache()
    c.observe(upd("tool_call", toolCallId="c1", title="A", rawInput={"x": 1}))
    c.observe(upd("tool_call", sid="s2", toolCallId="c1", title="B"))
    assert c.completion("s2", {"toolCallId": "c1"}) == {"title": "B"}
    assert c.completion("s1", {"toolCallId": "c2"}) is None
    assert c.completion("s3", {"toolCallId": "c1"}) is None
    c.observe(upd("tool_call", toolCallId="c1", title="A2"))
    assert c.completion("s1", {"toolCallId": "c1"}) == {"title": "A2"}
    # an update for a call never announced still counts; nulls do not erase
    c.observe(upd("tool_call_update", toolCallId="c9", kind="edit"))
    c.observe(upd("tool_call_update", toolCallId="c9", kind=None, title="Edit"))
    assert c.completion("s1", {"toolCallId": "c9"}) == {"kind": "edit", "title": "Edit"}


def test_garbage_is_ignored() -> None:
    c = ToolCallCache()
    for junk in (
        None,
        3,
        [],
        {"sessionId": 1},
        {"sessionId": "s", "update": []},
        {"sessionId": "s", "update": {"sessionUpdate": "tool_call"}},
        {"sessionId": "s", "update": {"sessionUpdate": "tool_call", "toolCallId": 5}},
    ):
        c.observe(junk)
    assert len(c) == 0
    assert c.completion("s", None) is None and c.completion("s", {"toolCallId": 1}) is None


def test_cache_is_bounded_by_entries_and_bytes() -> None:
    c = ToolCallCache(max_entries=3, max_bytes=1000)
    for i in range(5):
        c.observe(upd("tool_call", toolCallId=f"c{i}", title=str(i)), size=10)
    assert len(c) == 3 and c.completion("s1", {"toolCallId": "c0"}) is None
    c.observe(upd("tool_call", toolCallId="big", title="b"), size=995)
    assert c.completion("s1", {"toolCallId": "big"}) == {"title": "b"}
    assert len(c) == 1


def test_context_is_size_capped_dropping_bulk_first() -> None:
    c = ToolCallCache()
    huge = [{"type": "diff", "path": "a", "newText": "x" * (CONTEXT_BYTES + 10)}]
    c.observe(upd("tool_call", toolCallId="c1", title="Edit a", kind="edit", content=huge, locations=[{"path": "a"}]))
    assert c.completion("s1", {"toolCallId": "c1"}) == {"title": "Edit a", "kind": "edit", "locations": [{"path": "a"}]}


def test_result_mapping() -> None:
    assert result_from_record({"outcome": {"option_id": "ok", "feedback": None}}) == {
        "outcome": {"outcome": "selected", "optionId": "ok"}
    }
    assert result_from_record({"outcome": {"option_id": "ok", "feedback": "do X"}}) == {
        "outcome": {"outcome": "selected", "optionId": "ok"},
        "_meta": {"feedback": "do X"},
    }
    assert result_from_record({"state": "cancelled", "outcome": {"option_id": None}}) == {
        "outcome": {"outcome": "cancelled"}
    }
    assert result_from_record({"outcome": None}) == {"outcome": {"outcome": "cancelled"}}
    opts = [{"optionId": "a", "kind": "allow_once"}, {"optionId": "r", "kind": "reject_once"}]
    assert reject_result({"options": opts}) == {"outcome": {"outcome": "selected", "optionId": "r"}}
    assert reject_result({"options": opts[:1]}) == {"outcome": {"outcome": "cancelled"}}
    assert reject_result({}) == {"outcome": {"outcome": "cancelled"}}


def test_a_huge_field_is_not_kept_but_the_rest_is() -> None:
    c = ToolCallCache()
    big = "x" * (CONTEXT_BYTES + 1)
    c.observe(
        upd(
            "tool_call",
            toolCallId="c1",
            title="Write big",
            kind="edit",
            content=[{"type": "content", "content": {"type": "text", "text": big}}],
        ),
        size=len(big) + 200,
    )
    assert c.completion("s1", {"toolCallId": "c1"}) == {"title": "Write big", "kind": "edit"}
