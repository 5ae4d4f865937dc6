"""Codex's app-server requests as daemon records and the answers as Codex's replies (bot.codex.wire), from the
messages the real Codex 0.171.0 sent (tests/fixtures/codex-app/captured.json), and the line filter that takes
them off the relay. Fast: no Codex, no daemon."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import structlog

from bot.codex import wire
from bot.codex.filters import FromServer
from bot.door import forms
from bot.events.kinds import ANSWERED, DECLINE
from bot.inbox.submission import parse_submission

CAPTURED = json.loads((Path(__file__).parent / "fixtures" / "codex-app" / "captured.json").read_text())
AMEND = {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["/bin/bash", "-lc", "echo hi > a.txt"]}}


def selected(option_id: str) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


def submit(body: dict[str, Any]) -> Any:
    return parse_submission({**body, "key": "k:1"})


def test_a_command_approval_is_a_permission_with_an_option_per_decision_by_meaning() -> None:
    msg = CAPTURED["command_approval"]
    body = wire.approval_body(msg["method"], msg["params"], None)
    assert body["sessionId"] == msg["params"]["threadId"]
    tc = body["toolCall"]
    assert (tc["toolCallId"], tc["kind"], tc["title"]) == ("call_167", "execute", "/bin/bash -lc 'echo hi > a.txt'")
    assert tc["rawInput"] == {"reason": "Create a.txt?", "command": msg["params"]["command"],
                              "cwd": msg["params"]["cwd"]}
    # Codex offered accept, the amendment and cancel; decline (a no that lets the turn go on) is added before cancel
    assert [(o["optionId"], o["kind"]) for o in body["options"]] == [
        ("accept", "allow_once"), ("acceptWithExecpolicyAmendment", "allow_always"),
        ("decline", "reject_once"), ("cancel", "reject_once")]
    always = body["options"][1]["name"]
    assert "`/bin/bash -lc echo hi > a.txt`" in always and "every later session" in always
    submit(body)  # the daemon takes it


@pytest.mark.parametrize(("option", "decision"), [
    ("accept", "accept"), ("acceptWithExecpolicyAmendment", AMEND), ("decline", "decline"), ("cancel", "cancel")])
def test_the_reply_is_the_decision_as_codex_offered_it(option: str, decision: Any) -> None:
    msg = CAPTURED["command_approval"]
    assert wire.decision_reply(msg["method"], msg["params"], selected(option)) == {"decision": decision}


def test_a_reject_is_the_captured_reply_and_no_answer_cancels() -> None:
    msg = CAPTURED["command_approval"]
    assert wire.decision_reply(msg["method"], msg["params"], selected("decline")) == \
        CAPTURED["command_reply_decline"]["result"]
    assert wire.decision_reply(msg["method"], msg["params"], {"outcome": {"outcome": "cancelled"}}) == \
        {"decision": "cancel"}
    # an option Codex never offered is no decision: cancel, never an accept
    assert wire.decision_reply(msg["method"], msg["params"], selected("acceptForSession")) == {"decision": "cancel"}


def test_a_file_change_shows_the_files_codex_announced_and_offers_its_session_scope() -> None:
    item = {"type": "fileChange", "id": "call_9", "status": "inProgress",
            "changes": [{"path": "/w/a.txt", "kind": {"type": "add"}, "diff": "hello\n"}]}
    params = {"threadId": "t1", "turnId": "u1", "itemId": "call_9", "startedAtMs": 1, "reason": None}
    body = wire.approval_body(wire.FILE_CHANGE, params, item)
    tc = body["toolCall"]
    assert (tc["kind"], tc["title"]) == ("edit", "Edit /w/a.txt")
    assert tc["content"] == [{"type": "diff", "path": "/w/a.txt", "oldText": None, "newText": "hello\n"}]
    assert [(o["optionId"], o["kind"]) for o in body["options"]] == [
        ("accept", "allow_once"), ("acceptForSession", "allow_always"), ("decline", "reject_once"),
        ("cancel", "reject_once")]
    assert "rest of this Codex thread" in body["options"][1]["name"]
    submit(body)
    assert wire.decision_reply(wire.FILE_CHANGE, params, selected("acceptForSession")) == \
        {"decision": "acceptForSession"}


def test_an_approval_the_room_cannot_ask_is_not_askable() -> None:
    with pytest.raises(wire.NotAskable):
        wire.approval_body(wire.COMMAND, {"threadId": "t", "itemId": "i"}, None)  # no command
    with pytest.raises(wire.NotAskable):
        wire.approval_body(wire.COMMAND, {"threadId": "t", "itemId": "i", "command": "ls",
                                          "availableDecisions": ["cancel"]}, None)  # nothing to allow


def test_each_question_is_a_question_prompt_with_its_choices_and_free_text() -> None:
    params = CAPTURED["user_input"]["params"]
    asks = wire.asks_of(params)
    assert [a.key for a in asks] == ["database", "name"]
    assert [c.label for c in asks[0].choices] == ["Postgres (Recommended)", "SQLite"]
    assert all(a.free_text for a in asks)
    for i, ask in enumerate(asks, 1):
        body = forms.question_body(ask, session_id=params["threadId"], tool_call_id=f"call_147#{ask.key}",
                                   index=i, count=2)
        assert body["toolCall"]["rawInput"]["question"] == ask.text and body["toolCall"]["rawInput"]["freeText"]
        submit(body)


def rec(option_id: str | None, chosen: list[str] | None = None, text: str | None = None,
        feedback: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"option_id": option_id}
    if chosen:
        out["chosen"] = chosen
    if text is not None:
        out["answers"] = {"q": text}
    if feedback:
        out["feedback"] = feedback
    return {"state": "resolved", "outcome": out}


def test_the_answers_are_labels_or_the_persons_words_in_codexs_reply() -> None:
    asks = wire.asks_of(CAPTURED["user_input"]["params"])
    db, name = asks
    got = {
        "database": wire.answer_of(db, forms.answered(rec(wire.choice_value(0)))),
        "name": wire.answer_of(name, forms.answered(rec(wire.choice_value(0)))),
    }
    assert wire.answers_reply(got) == CAPTURED["rui_plan_reply"]["result"]
    other = {
        "database": wire.answer_of(db, forms.answered(rec(ANSWERED, text="MySQL, please"))),
        "name": wire.answer_of(name, forms.answered(rec(wire.choice_value(0), feedback="also: keep it small"))),
    }
    assert wire.answers_reply(other) == CAPTURED["rui_plan_other_reply"]["result"]
    assert wire.answers_reply({}) == CAPTURED["rui_plan_empty_reply"]["result"]


def test_a_declined_or_unanswered_question_gives_no_answer() -> None:
    db = wire.asks_of(CAPTURED["user_input"]["params"])[0]
    assert wire.answer_of(db, forms.answered(rec(DECLINE))) is None
    assert wire.answer_of(db, forms.answered({"state": "cancelled", "outcome": None})) is None


def test_a_secret_question_is_never_posted() -> None:
    params = json.loads(json.dumps(CAPTURED["user_input"]["params"]))
    params["questions"][1]["isSecret"] = True
    with pytest.raises(wire.NotAskable):
        wire.asks_of(params)


class FakeProxy:
    def __init__(self) -> None:
        self.approvals: list[tuple[dict[str, Any], dict[str, Any]]] = []
        self.inputs: list[dict[str, Any]] = []
        self.cwd_by_session: dict[str, str] = {}
        self.taken: dict[Any, int] = {}

    def on_approval(self, msg: dict[str, Any], body: dict[str, Any]) -> None:
        self.approvals.append((msg, body))

    def on_user_input(self, msg: dict[str, Any], asks: list[forms.Ask]) -> None:
        self.inputs.append(msg)

    def on_session(self, session_id: str) -> None:
        pass

    def on_turn_end(self, thread: Any, turn: Any) -> None:
        pass


async def test_the_filter_takes_approvals_and_questions_and_relays_everything_else() -> None:
    proxy = FakeProxy()
    f = FromServer(proxy, asyncio.get_running_loop())  # type: ignore[arg-type]
    line = (json.dumps(CAPTURED["command_approval"]) + "\n").encode()
    assert f.wants(line) and f.inspect(line) is False
    q = (json.dumps(CAPTURED["user_input"]) + "\n").encode()
    assert f.wants(q) and f.inspect(q) is False
    secret = json.loads(q)
    secret["params"]["questions"][0]["isSecret"] = True
    assert f.inspect((json.dumps(secret) + "\n").encode()) is True  # to the client as it is
    other = b'{"method":"item/started","params":{"item":{"type":"agentMessage","id":"m"}}}\n'
    assert not f.wants(other)
    await asyncio.sleep(0)
    assert len(proxy.approvals) == 1 and len(proxy.inputs) == 1


async def test_replies_and_resolutions_of_requests_the_proxy_took_stay_between_it_and_codex() -> None:
    from bot.codex.filters import FromClient
    from bot.codex.proxy import Proxy
    from bot.door.config import ProxyConfig
    from bot.door.ids import id_key

    proxy = Proxy(ProxyConfig(command=["codex"], url="http://127.0.0.1:9"))
    try:
        proxy.taken[id_key(0)] = 1  # type: ignore[index]  # Codex's request 0 was taken
        f = FromClient(proxy, asyncio.get_running_loop())
        forged = b'{"id":0,"result":{"decision":"accept"}}\n'
        assert f.wants(forged) and f.inspect(forged) is False  # the client never saw request 0: not relayed
        own = b'{"id":"0","result":{}}\n'  # another id (a string), another request
        assert f.inspect(own) is True
        assert await proxy.on_resolved(0) is True  # Codex's serverRequest/resolved for it: not relayed either
        assert await proxy.on_resolved(0) is False and not proxy.taken  # once; then Codex's own, relayed
        assert f.inspect(forged) is True
    finally:
        await proxy.daemon.close()


async def test_the_end_of_a_turn_withdraws_its_open_prompts_without_answering_codex() -> None:
    from bot.codex.proxy import Proxy
    from bot.door.config import ProxyConfig

    class Open:
        def __init__(self, turn: str) -> None:
            self.session_id, self.turn_id, self.done, self.task = "t1", turn, False, None
            self.withdrawn: list[tuple[str, bool]] = []
            self.log = structlog.get_logger("test")

        def withdraw(self, by: str, feedback: str, budget: float | None = None, *, answer: bool = True) -> None:
            self.withdrawn.append((by, answer))

    proxy = Proxy(ProxyConfig(command=["codex"], url="http://127.0.0.1:9"))
    try:
        mine, other = Open("u1"), Open("u2")
        proxy.pending.update({1: mine, 2: other})  # type: ignore[dict-item]
        proxy.on_turn_end("t1", "u1")
        assert mine.withdrawn == [("agent", False)] and other.withdrawn == []
        await proxy.interrupt("t1", "u2")
        assert other.withdrawn == [("client", True)]  # an interrupt answers Codex (cancel) before it goes on
    finally:
        await proxy.daemon.close()
