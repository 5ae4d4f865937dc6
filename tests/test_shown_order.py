"""One numbering on both sides: the prompt numbers options by meaning, and answers read numbers the same way.

Also the answer-side rules that depend on what the prompt showed: ✅ / ❌ reactions, and a shortened
prompt that a plain number cannot settle.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bot import answers
from bot.inbox.record import Record
from bot.inbox.submission import parse_submission
from bot.room.posts import prompt_complete, prompt_content
from bot.room.targets import as_target as _target

BOT = "@permbot:hs"
ALWAYS_FIRST = [
    {"optionId": "allow_always", "name": "Always Allow", "kind": "allow_always"},
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
]


def record(options: list[dict[str, Any]], command: str = "ls", rid: str = "s:1") -> Record:
    sub = parse_submission({
        "sessionId": "s", "options": options,
        "toolCall": {"toolCallId": "c", "title": "Run", "kind": "execute", "rawInput": {"command": command}},
    })
    return Record(
        id=rid, session_id="s", request_seq=1, key=None, label=None, tool_call_id=sub.tool_call_id,
        title=sub.title, tool_kind=sub.tool_kind, tool_name=sub.tool_name, options=sub.options,
        raw_input=sub.raw_input, locations=sub.locations, content=sub.content, params=sub.params,
        digest=sub.digest, revision=1, state="pending", requested_at=0.0, expires_at=600.0,
        prompt_event_id="$p", prompt_edited=False, outcome=None,
    )


def event(body: str | None = None, *, reply_to: str | None = None, reaction: str | None = None) -> dict[str, Any]:
    if reaction is not None:
        return {"type": "m.reaction", "sender": "@alice:hs", "event_id": "$a",
                "content": {"m.relates_to": {"rel_type": "m.annotation", "event_id": "$p", "key": reaction}}}
    content: dict[str, Any] = {"msgtype": "m.text", "body": body}
    if reply_to:
        content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
    return {"type": "m.room.message", "sender": "@alice:hs", "event_id": "$a", "content": content}


def answer(rec: Record, ev: dict[str, Any]) -> answers.Answer | answers.Refusal | None:
    cand = answers.classify(ev, bot_user_id=BOT)
    assert cand is not None
    target = _target(rec)
    return answers.resolve(cand, target, [target])  # a plain answer: bound to it (bot.answers.timeline)


KINDS = ["allow_once", "allow_always", "reject_once", "reject_always", "other", "something_new"]


@settings(max_examples=60, deadline=None)
@given(kinds=st.permutations(KINDS).flatmap(lambda p: st.integers(1, len(p)).map(lambda n: p[:n])))
def test_answers_number_the_options_as_the_prompt_shows_them(kinds: list[str]) -> None:
    rec = record([{"optionId": f"id_{k}", "name": f"Name {k}", "kind": k} for k in kinds])
    shown = prompt_content(rec)["options"]
    assert [oid for oid, _ in _target(rec).options] == [o["id"] for o in shown]
    for n, option in enumerate(shown, 1):
        got = answer(rec, event(str(n)))
        assert isinstance(got, answers.Answer) and got.option_id == option["id"]
        assert f"\n{n}. {option['label']}\n" in prompt_content(rec)["body"]


def test_always_allow_first_plain_1_is_allow_once() -> None:
    got = answer(record(ALWAYS_FIRST), event("1"))
    assert isinstance(got, answers.Answer) and got.option_id == "allow"


def test_check_and_cross_reactions() -> None:
    rec = record(ALWAYS_FIRST)
    ok = answer(rec, event(reaction="✅"))
    assert isinstance(ok, answers.Answer) and ok.option_id == "allow" and ok.via == "reaction"
    no = answer(rec, event(reaction="❌\ufe0f"))
    assert isinstance(no, answers.Answer) and no.option_id == "reject"
    only_always = record([ALWAYS_FIRST[0], ALWAYS_FIRST[2]])
    refused = answer(only_always, event(reaction="✅"))
    assert isinstance(refused, answers.Refusal) and "no allow once option" in refused.message
    assert answer(rec, event(reaction="👍")) is None


def test_a_shortened_prompt_is_not_settled_by_a_plain_number() -> None:
    rec = record(ALWAYS_FIRST, command="curl x | sh " + "#" * 3000, rid="s:9")
    assert prompt_complete(rec) is False and prompt_complete(record(ALWAYS_FIRST)) is True
    plain = answer(rec, event("1"))
    assert isinstance(plain, answers.Refusal) and plain.kind == "incomplete" and "reply to the prompt" in plain.message
    assert answer(rec, event("hello")) is None  # conversation stays conversation
    replied = answer(rec, event("1", reply_to="$p"))
    assert isinstance(replied, answers.Answer) and replied.option_id == "allow"


def test_notices_show_agent_option_names_as_agent_text() -> None:
    from dataclasses import replace

    from bot.inbox.record import Outcome
    from bot.room.answers import describe_outcome

    rec = record([{"optionId": "a", "name": "Ping @room\u202e", "kind": "allow_once"}])
    done = replace(rec, state="resolved", outcome=Outcome("a", "@alice:hs", "matrix", None, 1.0))
    assert describe_outcome(done).startswith("Ping ＠room<U+202E>, by @alice:hs via reply")
    refused = answer(rec, event("7", reply_to="$p"))  # the notice listing the options shows them the same way
    assert isinstance(refused, answers.Refusal) and "1. Ping ＠room<U+202E>" in refused.message
