"""The proxy's ACP edge (bot/acp/messages.py): params read with the SDK's ``acp.schema`` models.

Tolerant where real agents need it (a toolCall of only ``toolCallId``, unknown fields, malformed
optional fields salvaged), strict where it matters (options, ids), and what is sent on is the
agent's own JSON, never a model's re-serialisation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from acp.schema import CancelRequestNotification

from bot.acp import messages
from bot.acp.proxy import Proxy
from bot.acp.request import Request
from bot.acp.toolcalls import ToolCallCache
from bot.door import outcomes
from bot.door.config import ProxyConfig
from tests.agents.raw import RawRun
from tests.test_acp_proxy import FakeDaemon, flags
from tests.test_acp_proxy import daemon as fake  # noqa: F401  (the fixture)

OPTS = [
    {"optionId": "ok", "name": "Allow", "kind": "allow_once"},
    {"optionId": "no", "name": "Reject", "kind": "reject_once"},
]


def params(**kw: Any) -> dict[str, Any]:
    return {"sessionId": "s1", "toolCall": {"toolCallId": "c1"}, "options": OPTS, **kw}


class _NoDaemon:
    """A daemon that must not be called: a request that does not fit ACP never reaches it."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the daemon was called ({name}) for a request that does not fit ACP")


def request(p: Any, *, fallback: str = "reject") -> Request:
    proxy = Proxy(ProxyConfig(command=["agent"], fallback=fallback))  # type: ignore[arg-type]
    proxy.daemon = _NoDaemon()  # type: ignore[assignment]
    return Request(proxy, {"jsonrpc": "2.0", "id": 5, "method": "session/request_permission", "params": p}, 1)


def test_a_tool_call_of_only_its_id_is_a_request() -> None:
    req = messages.permission_request(params())
    assert req.session_id == "s1" and req.tool_call.tool_call_id == "c1" and req.tool_call.title is None
    assert [(o.option_id, o.kind) for o in req.options] == [("ok", "allow_once"), ("no", "reject_once")]


def test_unknown_fields_pass_and_the_submission_keeps_the_agents_json() -> None:
    sent = params(
        _vendor={"x": [1, 2.5, None]},
        toolCall={"toolCallId": "c1", "title": "Run", "futureField": {"a": None}, "kind": "brand_new_kind"},
        options=[{**OPTS[0], "hint": "new in a later ACP"}, OPTS[1]],
    )
    req = request(json.loads(json.dumps(sent)))
    assert req.invalid is None and req.session_id == "s1" and req.tool_call_id == "c1"
    body = req.body()
    # every field as sent, the unknown ones and the kind the SDK does not know included
    assert {k: v for k, v in body.items() if k != "key"} == sent
    assert req.acp is not None and req.acp.tool_call.kind is None  # salvaged in the model, not in the body


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (params(options=[{"optionId": "ok", "kind": "allow_once"}]), "options.0.name"),
        (params(options=[{"optionId": "ok", "name": "Allow", "kind": "allow_all"}]), "options.0.kind"),
        (params(options=[{"optionId": 7, "name": "Allow", "kind": "allow_once"}]), "options.0.optionId"),
        (params(options="allow"), "options"),
        (params(options=[OPTS[0], "no"]), "options.1"),
        (params(toolCall={"title": "no id"}), "toolCall.toolCallId"),
        (params(toolCall={"toolCallId": 3}), "toolCall.toolCallId"),
        (params(sessionId=None), "sessionId"),
        ({"toolCall": {"toolCallId": "c"}, "options": OPTS}, "sessionId"),
    ],
)
def test_malformed_params_are_refused_naming_the_field(bad: dict[str, Any], field: str) -> None:
    with pytest.raises(messages.BadMessage, match=rf"^{field}: "):
        messages.permission_request(bad)
    assert request(bad).invalid is not None and request(bad).body() == {}


@pytest.mark.parametrize(
    ("options", "answer"),
    [
        # a reject option that is itself whole is still the answer, as when the daemon refused
        ([{"optionId": "ok", "kind": "allow_once"}, {"optionId": "r", "name": "R", "kind": "reject_once"}],
         {"outcome": "selected", "optionId": "r"}),
        ([{"optionId": "ok", "name": "Allow", "kind": "allow_all"}], {"outcome": "cancelled"}),
        ("allow", {"outcome": "cancelled"}),
    ],
)
async def test_malformed_options_get_the_fallback_at_once(options: Any, answer: dict[str, Any]) -> None:
    req = request(params(options=options))
    result = await req._resolve()  # the daemon stand-in fails the test if it is asked
    assert result == {"outcome": answer}


def test_cancel_request_ids_are_taken_exactly() -> None:
    assert messages.withdrawn_id({"requestId": 1}) == 1
    assert messages.withdrawn_id({"requestId": "1", "extra": True}) == "1"
    for odd in (True, 1.0, [1], {"a": 1}):
        assert messages.withdrawn_id({"requestId": odd}) is None, odd
    assert messages.withdrawn_id({}) is None and messages.withdrawn_id([1]) is None
    # and the one the proxy writes itself, for a request it forwarded to the client
    assert outcomes.wire(CancelRequestNotification(request_id="permission-bot:fwd:p:1")) == {
        "requestId": "permission-bot:fwd:p:1"
    }


def test_cancel_and_close_name_their_session() -> None:
    from acp.schema import CancelNotification, CloseSessionRequest

    assert messages.session_of(CancelNotification, {"sessionId": "s", "_meta": 5, "x": 1}) == "s"
    assert messages.session_of(CloseSessionRequest, {"sessionId": "s"}) == "s"
    for bad in (None, [], {}, {"sessionId": 5}, {"sessionId": None}):
        assert messages.session_of(CancelNotification, bad) is None


def upd(what: str, **fields: Any) -> dict[str, Any]:
    return {"sessionId": "s1", "update": {"sessionUpdate": what, **fields}, "_vendor": 1}


def test_tool_call_updates_are_read_with_the_models() -> None:
    note = messages.tool_call_note(upd("tool_call_update", toolCallId="c1"))
    assert note is not None and note[0] == "s1" and note[1].tool_call_id == "c1" and note[2] is False
    note = messages.tool_call_note(upd("tool_call", toolCallId="c1", title="T", extra={"y": 2}))
    assert note is not None and note[2] is True
    # ACP's tool_call needs a title; other kinds are not read at all
    assert messages.tool_call_note(upd("tool_call", toolCallId="c1")) is None
    assert messages.tool_call_note(upd("plan", entries="not even a list")) is None
    assert messages.tool_call_note(upd("tool_call_update")) is None


def test_a_malformed_part_is_salvaged_and_the_rest_completes_a_request() -> None:
    c = ToolCallCache()
    good = {"type": "content", "content": {"type": "text", "text": "hi"}}
    c.observe(
        upd(
            "tool_call",
            toolCallId="c1",
            title="Edit a",
            kind="telepathy",  # not an ACP kind: dropped, the rest kept
            content=[{"type": "hologram"}, good, {"type": "diff", "path": "a"}],
            locations=[{"path": "a", "line": 3, "more": 1}, {"line": 2}],
            rawInput={"a": None},
        )
    )
    assert c.completion("s1", {"toolCallId": "c1"}) == {
        "title": "Edit a",
        "rawInput": {"a": None},
        "content": [good],
        "locations": [{"path": "a", "line": 3}],
    }


async def test_a_request_that_does_not_fit_acp_never_reaches_the_daemon(
    fake: FakeDaemon,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A hostile agent's malformed options: refused in the proxy with the fallback answer (the
    well-formed reject option), nothing submitted, later requests unaffected."""
    r = await RawRun.start(flags(fake), tmp_path)
    try:
        bad = params(options=[{"optionId": "ok", "kind": "allow_once"}, OPTS[1]])
        await r.agent_sends(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session/request_permission",
                                        "params": bad}))
        reply = await r.agent_reply(1)
        assert reply["result"]["outcome"] == {"outcome": "selected", "optionId": "no"}
        assert fake.submissions == []
        assert await r.logged("fallback_rejected")
        assert await r.logged("options.0.name: Field required")
        assert not any(b"request_permission" in x for x in r.client_lines)
        sparse = params(toolCall={"toolCallId": "c2", "newField": True}, _meta={"v": 1})
        line = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/request_permission", "params": sparse})
        await r.agent_sends(line)
        (rec,) = await fake.wait_pending()
        assert rec["params"] == sparse  # the agent's JSON, unknown fields included
        await fake.settle(rec["id"], "ok")
        assert (await r.agent_reply(2))["result"]["outcome"] == {"outcome": "selected", "optionId": "ok"}
    finally:
        await r.close()
