"""bot.answers: Matrix events -> Candidate -> Answer | Refusal | None."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.answers import (
    ANSWER_KEY,
    KEYCAPS,
    Answer,
    Candidate,
    Refusal,
    Target,
    classify,
    keycap_index,
    resolve,
)

BOT = "@permbot:example.org"
ALICE = "@alice:example.org"
PROMPT = "$prompt_event:example.org"
OPTIONS = (
    ("allow_once", "Allow once"),
    ("allow_always", "Always allow"),
    ("reject_once", "Reject"),
    ("reject_always", "Never allow"),
)
DIGEST = "bb03bfd8ee6d757e6957d029cd6a7b8e004f16386755ce672e3f97f445563878"
PROMPT_BODY = (
    "Permission needed: Run the test suite\n\n1. Allow once\n2. Always allow\n3. Reject\n4. Never allow"
    "\n\nReply with the number, or the option's name."
)


def target(
    request_id: str = "acps_3f0c:12",
    prompt_event_id: str | None = PROMPT,
    options: Any = OPTIONS,
    pending: bool = True,
    digest: str = DIGEST,
    revision: int = 1,
) -> Target:
    return Target(request_id, prompt_event_id, options, digest, revision, pending)


def event(content: dict[str, Any], **over: Any) -> dict[str, Any]:
    ev: dict[str, Any] = {
        "type": "m.room.message",
        "sender": ALICE,
        "event_id": "$answer:example.org",
        "origin_server_ts": 1764493200000,
        "content": content,
        "unsigned": {"age": 120, "transaction_id": "m1764493200000.3"},
    }
    ev.update(over)
    return ev


def text_event(body: str) -> dict[str, Any]:
    return event({"msgtype": "m.text", "body": body})


def reply_event(answer: str, to: str = PROMPT) -> dict[str, Any]:
    """A reply as Element sends it: fallback quote in body, mx-reply in formatted_body."""
    quoted = "\n".join(("> " + line) if line else "> " for line in PROMPT_BODY.split("\n"))
    quoted = quoted.replace("> Permission needed", f"> <{BOT}> Permission needed", 1)
    return event(
        {
            "msgtype": "m.text",
            "body": f"{quoted}\n\n{answer}",
            "format": "org.matrix.custom.html",
            "formatted_body": (
                f'<mx-reply><blockquote><a href="https://matrix.to/#/!room:example.org/{to}">In reply to</a> '
                f'<a href="https://matrix.to/#/{BOT}">{BOT}</a><br>Permission needed: Run the test suite'
                f"</blockquote></mx-reply>{answer}"
            ),
            "m.relates_to": {"m.in_reply_to": {"event_id": to}},
        }
    )


def thread_event(answer: str, root: str = PROMPT, latest: str = "$latest:example.org") -> dict[str, Any]:
    return event(
        {
            "msgtype": "m.text",
            "body": answer,
            "m.relates_to": {
                "rel_type": "m.thread",
                "event_id": root,
                "is_falling_back": True,
                "m.in_reply_to": {"event_id": latest},
            },
        }
    )


def reaction_event(key: str, to: str = PROMPT) -> dict[str, Any]:
    return {
        "type": "m.reaction",
        "sender": ALICE,
        "event_id": "$reaction:example.org",
        "origin_server_ts": 1764493200000,
        "content": {"m.relates_to": {"rel_type": "m.annotation", "event_id": to, "key": key}},
        "unsigned": {"age": 5},
    }


def structured_event(payload: Any, body: str = "Allow once") -> dict[str, Any]:
    return event({"msgtype": "m.text", "body": body, ANSWER_KEY: payload})


def cand(ev: dict[str, Any]) -> Candidate:
    c = classify(ev, bot_user_id=BOT)
    assert c is not None
    return c


def plain(text: str) -> Candidate:
    return Candidate("$e", ALICE, "matrix", None, None, text, None, None, None, None, None, False)


def explicit(text: str) -> Candidate:
    return Candidate("$e", ALICE, "matrix", PROMPT, None, text, None, None, None, None, None, True)


# --------------------------------------------------------------------------- classify


def test_plain_message() -> None:
    c = cand(text_event("  2  "))
    assert c == Candidate(
        "$answer:example.org", ALICE, "matrix", None, None, "2", None, None, None, None, None, False
    )


def test_reply_strips_fallback_and_addresses_prompt() -> None:
    c = cand(reply_event("3 because the tests are flaky"))
    assert c.via == "matrix" and c.explicit
    assert c.prompt_event_id == PROMPT
    assert c.text == "3 because the tests are flaky"


def test_reply_fallback_variants() -> None:
    ev = event(
        {
            "msgtype": "m.text",
            "body": f"> <{BOT}> first\n>\n> more\n\n  Reject\nsecond line",
            "m.relates_to": {"m.in_reply_to": {"event_id": PROMPT}},
        }
    )
    assert cand(ev).text == "Reject\nsecond line"
    # Newer clients send no fallback at all.
    ev = event({"msgtype": "m.text", "body": "2", "m.relates_to": {"m.in_reply_to": {"event_id": PROMPT}}})
    assert cand(ev).text == "2"
    # Only the fallback: nothing left.
    ev = event(
        {"msgtype": "m.text", "body": "> <@a:b> x", "m.relates_to": {"m.in_reply_to": {"event_id": PROMPT}}}
    )
    assert cand(ev).text == ""


def test_quote_in_plain_message_is_kept() -> None:
    assert cand(text_event("> a quote\n\n2")).text == "> a quote\n\n2"


def test_thread_prefers_root_over_fallback_reply() -> None:
    c = cand(thread_event("allow once"))
    assert c.prompt_event_id == PROMPT and c.explicit and c.text == "allow once"


def test_thread_real_reply_still_uses_root() -> None:
    ev = thread_event("2")
    ev["content"]["m.relates_to"]["is_falling_back"] = False
    assert cand(ev).prompt_event_id == PROMPT


def test_reaction() -> None:
    c = cand(reaction_event("2\ufe0f\u20e3"))
    assert c.via == "reaction" and c.reaction_key == "2\ufe0f\u20e3"
    assert c.prompt_event_id == PROMPT and c.explicit and c.text is None


def test_structured() -> None:
    payload = {
        "request_id": "acps_3f0c:12",
        "option_id": "reject_once",
        "subject": {"digest": DIGEST, "revision": 1},
        "feedback": " use bun test --bail ",
    }
    c = cand(structured_event(payload))
    assert c.via == "structured" and c.explicit
    assert (c.request_id, c.option_id, c.digest, c.revision) == ("acps_3f0c:12", "reject_once", DIGEST, 1)
    assert c.feedback == "use bun test --bail"
    assert c.text is None and c.problem is None


def test_structured_wins_over_body() -> None:
    c = cand(structured_event({"request_id": "r:1", "option_id": "reject_once"}, body="1"))
    assert c.via == "structured" and c.option_id == "reject_once"


def test_structured_nulls_are_absent() -> None:
    c = cand(
        structured_event({"request_id": "r:1", "option_id": "a", "subject": None, "feedback": None}, body="x")
    )
    assert c.problem is None and c.digest is None and c.revision is None and c.feedback is None


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        ({"request_id": "r:1"}, "option_id is missing"),
        ({"request_id": "r:1", "option_id": 3}, "option_id is not text"),
        ({"request_id": "r:1", "option_id": "a", "subject": "x"}, "subject is not an object"),
        ({"request_id": "r:1", "option_id": "a", "subject": {"digest": 1}}, "subject.digest is not text"),
        ({"request_id": "r:1", "option_id": "a", "subject": {"revision": "2"}}, "not a whole number"),
        ({"request_id": "r:1", "option_id": "a", "subject": {"revision": True}}, "not a whole number"),
        ({"request_id": "r:1", "option_id": "a", "subject": {"revision": 1.5}}, "not a whole number"),
        ({"request_id": "r:1", "option_id": "a", "feedback": ["x"]}, "feedback is not text"),
    ],
)
def test_structured_malformed_is_refused_by_resolve(payload: dict[str, Any], problem: str) -> None:
    c = cand(structured_event(payload))
    assert c.problem is not None and problem in c.problem
    t = target(request_id="r:1", options=(("a", "A"),))
    r = resolve(c, t, [t])
    assert isinstance(r, Refusal) and r.kind == "unparsable" and problem in r.message


@pytest.mark.parametrize("payload", [None, "r:1", [], {}, {"request_id": ""}, {"request_id": 5}])
def test_structured_without_request_id_is_nothing(payload: Any) -> None:
    assert classify(structured_event(payload), bot_user_id=BOT) is None


@pytest.mark.parametrize(
    "ev",
    [
        pytest.param(text_event("2") | {"sender": BOT}, id="own message"),
        pytest.param(reaction_event("1\ufe0f\u20e3") | {"sender": BOT}, id="own reaction"),
        pytest.param(
            {"type": "m.room.redaction", "sender": ALICE, "event_id": "$r", "redacts": "$x", "content": {}},
            id="redaction",
        ),
        pytest.param(
            event({}, unsigned={"redacted_because": {"type": "m.room.redaction"}}), id="redacted message"
        ),
        pytest.param(
            event(
                {
                    "msgtype": "m.text",
                    "body": " * 3",
                    "m.new_content": {"msgtype": "m.text", "body": "3"},
                    "m.relates_to": {"rel_type": "m.replace", "event_id": "$answer"},
                }
            ),
            id="edit",
        ),
        pytest.param(
            event(
                {
                    "msgtype": "m.text",
                    "body": "3",
                    "m.relates_to": {"rel_type": "m.replace", "event_id": "$a"},
                }
            ),
            id="edit without new_content",
        ),
        pytest.param(
            event({"msgtype": "m.text", "body": "3", "m.new_content": {"body": "3"}}), id="new_content"
        ),
        pytest.param(event({"msgtype": "m.notice", "body": "2"}), id="notice"),
        pytest.param(
            event({"msgtype": "m.notice", "body": "x", ANSWER_KEY: {"request_id": "r", "option_id": "a"}}),
            id="structured notice",
        ),
        pytest.param(
            event(
                {"msgtype": "m.text", "body": PROMPT_BODY, "suite_event_type": "dev.agentpod.permission.v2"}
            ),
            id="another bot's prompt",
        ),
        pytest.param(event({"msgtype": "m.image", "body": "2", "url": "mxc://x/y"}), id="image"),
        pytest.param(event({"msgtype": "m.emote", "body": "2"}), id="emote"),
        pytest.param(
            {"type": "m.sticker", "sender": ALICE, "event_id": "$s", "content": {"body": "2"}}, id="sticker"
        ),
        pytest.param(
            {
                "type": "m.room.message",
                "sender": ALICE,
                "event_id": "$s",
                "state_key": "",
                "content": {"body": "2"},
            },
            id="state event",
        ),
        pytest.param(
            reaction_event("1\ufe0f\u20e3")
            | {"content": {"m.relates_to": {"rel_type": "m.reference", "event_id": PROMPT}}},
            id="reaction without annotation",
        ),
        pytest.param(
            event(
                {
                    "msgtype": "m.text",
                    "body": "2",
                    "m.relates_to": {"rel_type": "m.reference", "event_id": "$x"},
                }
            ),
            id="other relation",
        ),
    ],
)
def test_not_answers(ev: dict[str, Any]) -> None:
    assert classify(ev, bot_user_id=BOT) is None


@pytest.mark.parametrize(
    "mutate",
    [
        lambda e: e.update(type=None),
        lambda e: e.update(sender=5),
        lambda e: e.update(sender=""),
        lambda e: e.update(event_id=["$x"]),
        lambda e: e.update(content="2"),
        lambda e: e.update(unsigned=[]),
        lambda e: e["content"].update(body=2),
        lambda e: e["content"].update(msgtype=None),
        lambda e: e["content"].update({"m.relates_to": "x"}),
        lambda e: e["content"].update({"m.relates_to": {"m.in_reply_to": "$x"}}),
        lambda e: e["content"].update({"m.relates_to": {"m.in_reply_to": {"event_id": 7}}}),
        lambda e: e["content"].update({"m.relates_to": {"m.in_reply_to": {"event_id": ""}}}),
        lambda e: e["content"].update({"m.relates_to": {"rel_type": "m.thread"}}),
        lambda e: e["content"].update({"m.relates_to": {"rel_type": "m.thread", "event_id": {}}}),
        lambda e: e["content"].update({"m.relates_to": {"rel_type": 1, "event_id": "$x"}}),
        lambda e: e["content"].update(
            {"m.relates_to": {"rel_type": "m.thread", "event_id": "$r", "is_falling_back": "yes"}}
        ),
    ],
)
def test_malformed_fields(mutate: Any) -> None:
    ev = text_event("2")
    mutate(ev)
    assert classify(ev, bot_user_id=BOT) is None


def test_malformed_reactions() -> None:
    for rel in (
        "x",
        {"rel_type": "m.annotation", "event_id": PROMPT},
        {"rel_type": "m.annotation", "key": "1"},
        {"rel_type": "m.annotation", "event_id": PROMPT, "key": 1},
        None,
    ):
        ev = reaction_event("1")
        ev["content"] = {"m.relates_to": rel}
        assert classify(ev, bot_user_id=BOT) is None
    assert classify(reaction_event("1") | {"content": []}, bot_user_id=BOT) is None


def test_not_a_mapping() -> None:
    junk: tuple[Any, ...] = (None, [], "event", 3)
    for value in junk:
        assert classify(value, bot_user_id=BOT) is None


# --------------------------------------------------------------------------- keycaps


def test_keycaps() -> None:
    assert len(KEYCAPS) == 10 and KEYCAPS[0] == "1\ufe0f\u20e3" and KEYCAPS[9] == "\U0001f51f"
    for i, key in enumerate(KEYCAPS, 1):
        assert keycap_index(key) == i
        assert keycap_index(key.replace("\ufe0f", "")) == i
    for other in ("0\ufe0f\u20e3", "#\ufe0f\u20e3", "👍", "1", "", "1\ufe0f\u20e3 ", "11\u20e3"):
        assert keycap_index(other) is None


# --------------------------------------------------------------------------- resolve: text


@pytest.mark.parametrize(
    ("text", "option", "feedback"),
    [
        ("2", "allow_always", None),
        (" 2. ", "allow_always", None),
        ("#2", "allow_always", None),
        ("2)", "allow_always", None),
        ("02", "allow_always", None),
        ("3 - because the tests are flaky", "reject_once", "because the tests are flaky"),
        ("2 - fine", "allow_always", "fine"),
        ("2: fine", "allow_always", "fine"),
        ("2 — fine", "allow_always", "fine"),
        ("2 – fine: really", "allow_always", "fine: really"),
        ("2\nfine", "allow_always", "fine"),
        ("2 -", "allow_always", None),
        ("2.\nline two", "allow_always", "line two"),
        ("Allow once", "allow_once", None),
        ("allow   ONCE", "allow_once", None),
        ("Allow once: but be careful", "allow_once", "but be careful"),
        ("Allow once - but be careful", "allow_once", "but be careful"),
        ("never allow.", "reject_always", None),
        ("reject_always", "reject_always", None),
        ("REJECT_ONCE: no network please", "reject_once", "no network please"),
        ("Reject", "reject_once", None),
    ],
)
def test_text_answers(text: str, option: str, feedback: str | None) -> None:
    t = target()
    for c in (explicit(text), plain(text)):
        assert resolve(c, t, [t]) == Answer("acps_3f0c:12", option, "matrix", feedback, ALICE, "$e")


def test_longest_label_wins_and_casefold() -> None:
    t = target(request_id="r", options=(("a", "Allow"), ("b", "Allow always"), ("c", "STRASSE")))
    assert resolve(plain("allow always - please"), t, [t]) == Answer("r", "b", "matrix", "please", ALICE, "$e")
    assert resolve(plain("Allow: always"), t, [t]) == Answer("r", "a", "matrix", "always", ALICE, "$e")
    dashed = target(request_id="r", options=(("a", "Allow"), ("b", "Allow - once")))
    assert resolve(plain("allow - once: ok"), dashed, [dashed]) == Answer("r", "b", "matrix", "ok", ALICE, "$e")
    assert resolve(plain("straße"), t, [t]) == Answer("r", "c", "matrix", None, ALICE, "$e")


def test_number_wins_over_numeric_label_and_label_over_id() -> None:
    t = target(request_id="r", options=(("x", "2"), ("y", "Yes"), ("yes", "Other")))
    assert resolve(plain("2"), t, [t]) == Answer("r", "y", "matrix", None, ALICE, "$e")
    assert resolve(plain("yes"), t, [t]) == Answer("r", "y", "matrix", None, ALICE, "$e")


@pytest.mark.parametrize("text", ["2.5", "2-fine", "2)x", "#", "hello", "(2)", "two", "", "yes"])
def test_not_an_answer(text: str) -> None:
    t = target()
    assert resolve(plain(text), t, [t]) is None
    r = resolve(explicit(text), t, [t])
    assert isinstance(r, Refusal) and r.kind == "unparsable" and r.request_id == "acps_3f0c:12"


@pytest.mark.parametrize(
    "text",
    ["1 sec, let me check…", "allow me to look first", "2, fine", "Allow once but be careful",
     "3 because the tests are flaky", "reject the idea? no", "1 2", "3:30 works for me", "what does this do?"],
)
def test_conversation_is_left_alone(text: str) -> None:
    """CONTRACT: the whole text is the answer; a number or name followed by other words is conversation."""
    t = target()
    assert resolve(plain(text), t, [t]) is None
    assert resolve(explicit(text), t, [t]) is None  # in a thread or a reply too: no answer, no notice
    assert resolve(plain(text), None, [t]) is None  # and no "which one?" either


def test_unparsable_message_lists_choices() -> None:
    t = target()
    r = resolve(explicit("approve?"), t, [t])
    assert r == Refusal(
        "unparsable",
        "Answer with a number 1–4 or an option's name: "
        "1. Allow once, 2. Always allow, 3. Reject, 4. Never allow.",
        "acps_3f0c:12",
    )
    r = resolve(explicit("7"), t, [t])
    assert isinstance(r, Refusal) and r.message.startswith("There is no option 7. Answer with a number 1–4")
    one = target(options=(("ok", "OK"),))
    r = resolve(explicit("9"), one, [one])
    assert isinstance(r, Refusal) and "Answer with 1 or the option's name: 1. OK." in r.message
    none = target(options=())
    r = resolve(explicit("1"), none, [none])
    assert isinstance(r, Refusal) and r.kind == "not_offered"  # logged as such, not as reason='unparsable'


def test_out_of_range_plain_number_is_told_there_is_no_such_option() -> None:
    """A plain "7" bound to a four-option prompt is an answer gone wrong, as it is under a reply: say so."""
    t = target()
    for n in ("7", "0"):
        r = resolve(plain(n), t, [t])
        assert isinstance(r, Refusal) and r.kind == "not_offered" and r.message.startswith(f"There is no option {n}.")
    assert resolve(plain("9" * 5000), t, [t]) is None  # no number a prompt could have: chat
    assert resolve(plain("7 cats"), t, [t]) is None


def test_explicit_reply_to_unknown_event_is_chat() -> None:
    t = target()
    assert resolve(explicit("2"), None, [t]) is None


def test_explicit_to_settled_prompt() -> None:
    done = target(pending=False)
    for text in ("2", "Reject", "9"):
        r = resolve(explicit(text), done, [])
        assert isinstance(r, Refusal) and r.kind == "not_pending" and r.request_id == "acps_3f0c:12"
    assert resolve(explicit("thanks, that was quick"), done, []) is None


def test_plain_with_no_pending() -> None:
    assert resolve(plain("2"), None, []) is None
    assert resolve(plain("2"), None, [target(pending=False)]) is None


def test_plain_with_several_pending() -> None:
    a = target(request_id="s1:1")
    b = target(request_id="s2:7", options=(("go", "Go ahead"),))
    r = resolve(plain("2"), None, [a, b])
    assert r == Refusal(
        "ambiguous",
        "Which request do you mean? 2 requests are waiting (s1:1, s2:7). Reply to the prompt you mean: "
        "a plain answer counts only for the one open prompt just above it.",
        None,
    )
    r = resolve(plain("go ahead"), None, [a, b])
    assert isinstance(r, Refusal) and r.kind == "ambiguous"
    assert resolve(plain("lunch?"), None, [a, b]) is None
    assert resolve(plain("5"), None, [a, b]) is None
    many = [target(request_id=f"s:{i}") for i in range(8)]
    r = resolve(plain("1"), None, many)
    assert isinstance(r, Refusal) and "s:0, s:1, s:2, s:3, s:4 and 3 more" in r.message


def test_plain_unbound_asks_even_with_one_pending() -> None:
    """A plain answer no prompt is bound to (bot.answers.timeline) never guesses, even when one is pending."""
    live = target(request_id="live:1")
    r = resolve(plain("1"), None, [target(request_id="old:1", pending=False), live])
    assert isinstance(r, Refusal) and r.kind == "ambiguous" and "Request live:1 is waiting" in r.message
    assert resolve(plain("1 sec, let me check"), None, [live]) is None  # conversation: no notice


def test_plain_bound_to_a_settled_prompt() -> None:
    r = resolve(plain("1"), target(pending=False), [target(request_id="b:1")])
    assert isinstance(r, Refusal) and r.kind == "not_pending" and r.request_id == "acps_3f0c:12"
    assert resolve(plain("thanks"), target(pending=False), []) is None


def test_structured_answer_checks_the_prompt_it_replies_to() -> None:
    c = cand(reply_event("x") | {"content": {**reply_event("x")["content"],
                                             ANSWER_KEY: {"request_id": "other:1", "option_id": "allow_once"}}})
    assert c.via == "structured" and c.prompt_event_id == PROMPT
    r = resolve(c, target(), [])
    assert isinstance(r, Refusal) and "other:1" in r.message and "acps_3f0c:12" in r.message
    r = resolve(c, None, [])  # replies to something that is not a prompt (or someone else's fake one)
    assert isinstance(r, Refusal) and r.kind == "unknown_request" and "not its prompt" in r.message


def test_end_to_end_reply_and_thread() -> None:
    t = target()
    c = cand(reply_event("4: not on a Friday"))
    assert resolve(c, t, [t]) == Answer(
        "acps_3f0c:12", "reject_always", "matrix", "not on a Friday", ALICE, "$answer:example.org"
    )
    c = cand(thread_event("Always allow"))
    assert resolve(c, t, [t, target(request_id="other:1")]) == Answer(
        "acps_3f0c:12", "allow_always", "matrix", None, ALICE, "$answer:example.org"
    )


# --------------------------------------------------------------------------- resolve: reactions


def test_reactions() -> None:
    t = target()
    c = cand(reaction_event("3\ufe0f\u20e3"))
    assert resolve(c, t, [t]) == Answer(
        "acps_3f0c:12", "reject_once", "reaction", None, ALICE, "$reaction:example.org"
    )
    assert isinstance(resolve(cand(reaction_event("1\u20e3")), t, [t]), Answer)
    assert resolve(cand(reaction_event("👍")), t, [t]) is None
    assert resolve(c, None, [t]) is None
    r = resolve(cand(reaction_event("\U0001f51f")), t, [t])
    assert (
        isinstance(r, Refusal) and r.kind == "not_offered" and r.message.startswith("There is no option 10.")
    )
    r = resolve(c, target(pending=False), [])
    assert isinstance(r, Refusal) and r.kind == "not_pending"
    assert resolve(cand(reaction_event("👍")), target(pending=False), []) is None


# --------------------------------------------------------------------------- resolve: structured


def structured(**over: Any) -> Candidate:
    payload: dict[str, Any] = {"request_id": "acps_3f0c:12", "option_id": "allow_always"}
    payload.update(over)
    return cand(structured_event(payload))


def test_structured_answer() -> None:
    t = target()
    c = structured(subject={"digest": DIGEST, "revision": 1}, feedback="ok")
    assert resolve(c, t, [t]) == Answer(
        "acps_3f0c:12", "allow_always", "structured", "ok", ALICE, "$answer:example.org"
    )
    assert isinstance(resolve(structured(), t, []), Answer)


def test_structured_stale() -> None:
    t = target(revision=2)
    r = resolve(structured(subject={"digest": "0" * 64}), t, [t])
    assert isinstance(r, Refusal) and r.kind == "stale" and "changed" in r.message
    r = resolve(structured(subject={"revision": 1}), t, [t])
    assert isinstance(r, Refusal) and r.kind == "stale" and "revision (now 2)" in r.message
    assert isinstance(resolve(structured(subject={"revision": 2}), t, [t]), Answer)


def test_structured_refusals() -> None:
    t = target()
    r = resolve(structured(option_id="maybe"), t, [t])
    assert isinstance(r, Refusal) and r.kind == "unparsable"
    assert "maybe" in r.message and "allow_once, allow_always, reject_once, reject_always" in r.message
    r = resolve(structured(request_id="nope:1"), None, [t])
    assert r == Refusal("unknown_request", "No request nope:1 is known.", "nope:1")
    r = resolve(structured(), target(pending=False), [])
    assert isinstance(r, Refusal) and r.kind == "not_pending"
    r = resolve(structured(request_id="other:2"), t, [t])
    assert isinstance(r, Refusal) and r.kind == "unparsable" and "other:2" in r.message


# --------------------------------------------------------------------------- properties

_leaf = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
_names = st.sampled_from(
    [
        "m.relates_to",
        "m.in_reply_to",
        "rel_type",
        "event_id",
        "key",
        "body",
        "msgtype",
        "m.new_content",
        "suite_event_type",
        ANSWER_KEY,
        "request_id",
        "option_id",
        "subject",
        "digest",
        "revision",
        "feedback",
        "is_falling_back",
        "redacted_because",
        "format",
        "formatted_body",
    ]
)
_realish = st.sampled_from(
    [
        "m.text",
        "m.notice",
        "m.thread",
        "m.annotation",
        "m.replace",
        PROMPT,
        "1\ufe0f\u20e3",
        "2",
        "> x\n\n2",
        "",
    ]
)
_json = st.recursive(
    _leaf | _realish,
    lambda ch: (
        st.lists(ch, max_size=3)
        | st.dictionaries(_names, ch, max_size=5)
        | st.dictionaries(st.text(max_size=4), ch, max_size=3)
    ),
    max_leaves=20,
)
_junk_events = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["m.room.message", "m.reaction"]) | _json,
        "sender": st.sampled_from([ALICE, BOT]) | _json,
        "event_id": st.just("$e") | _json,
        "content": st.dictionaries(_names, _json, max_size=6) | _json,
    },
    optional={"unsigned": _json, "origin_server_ts": _json, "state_key": _json},
)
_BASES = [
    text_event("2 fine"),
    reply_event("Reject"),
    thread_event("1"),
    reaction_event(KEYCAPS[1]),
    structured_event(
        {"request_id": "acps_3f0c:12", "option_id": "allow_once", "subject": {"digest": DIGEST}}
    ),
]


def _dicts(value: Any) -> list[dict[str, Any]]:
    """Every dict inside ``value`` (itself included)."""
    found = [value] if isinstance(value, dict) else []
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    for child in children:
        found.extend(_dicts(child))
    return found


@st.composite
def _mutated_events(draw: st.DrawFn) -> dict[str, Any]:
    """A realistic event with a few fields replaced by junk or removed."""
    ev: dict[str, Any] = copy.deepcopy(draw(st.sampled_from(_BASES)))
    for _ in range(draw(st.integers(0, 3))):
        d = draw(st.sampled_from(_dicts(ev)))
        key = draw(st.sampled_from(sorted(d)) | _names) if d else draw(_names)
        if draw(st.booleans()):
            d[key] = draw(_json)
        else:
            d.pop(key, None)
    return ev


_events = _mutated_events() | _junk_events
_targets = st.builds(
    Target,
    request_id=st.text(max_size=10),
    prompt_event_id=st.none() | st.just(PROMPT),
    options=st.lists(st.tuples(st.text(max_size=12), st.text(max_size=12)), max_size=12),
    digest=st.text(max_size=5),
    revision=st.integers(),
    pending=st.booleans(),
)


@settings(max_examples=200, deadline=None)
@given(_events, _targets, st.lists(_targets, max_size=3))
def test_classify_and_resolve_never_raise(ev: dict[str, Any], t: Target, pending: list[Target]) -> None:
    c = classify(ev, bot_user_id=BOT)
    assert c is None or isinstance(c, Candidate)
    if c is not None:
        assert isinstance(c.event_id, str) and isinstance(c.sender, str) and c.sender != BOT
        assert c.explicit == (c.prompt_event_id is not None or c.via == "structured")
        if c.via == "matrix":
            assert isinstance(c.text, str) and c.text == c.text.strip()
        if c.via == "reaction":
            assert isinstance(c.reaction_key, str) and isinstance(c.prompt_event_id, str)
        if c.via == "structured":
            assert isinstance(c.request_id, str)
            assert c.problem is not None or isinstance(c.option_id, str)
            assert c.revision is None or type(c.revision) is int
        for tt in (t, None):
            assert resolve(c, tt, pending) is None or isinstance(resolve(c, tt, pending), Answer | Refusal)


@settings(max_examples=300, deadline=None)
@given(
    st.builds(
        Candidate,
        event_id=st.text(max_size=5),
        sender=st.text(max_size=5),
        via=st.sampled_from(["matrix", "reaction", "structured"]),
        prompt_event_id=st.none() | st.text(max_size=5),
        request_id=st.none() | st.text(max_size=10),
        text=st.none() | st.text(max_size=60),
        reaction_key=st.none() | st.sampled_from(KEYCAPS) | st.text(max_size=3),
        option_id=st.none() | st.text(max_size=12),
        digest=st.none() | st.text(max_size=5),
        revision=st.none() | st.integers(),
        feedback=st.none() | st.text(max_size=10),
        explicit=st.booleans(),
        problem=st.none() | st.text(max_size=10),
    ),
    st.none() | _targets,
    st.lists(_targets, max_size=4),
)
def test_resolve_any_candidate(c: Candidate, t: Target | None, pending: list[Target]) -> None:
    r = resolve(c, t, pending)
    assert r is None or isinstance(r, Answer | Refusal)
    if isinstance(r, Refusal):
        assert r.message and "\n" not in r.message
    if isinstance(r, Answer):
        owner = [x for x in [t, *pending] if x is not None and x.request_id == r.request_id]
        assert any(r.option_id in [o for o, _ in x.options] for x in owner)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200), st.booleans(), _targets)
def test_arbitrary_text(text: str, is_explicit: bool, t: Target) -> None:
    c = explicit(text) if is_explicit else plain(text)
    r = resolve(c, t, [t])
    assert r is None or isinstance(r, Answer | Refusal)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 20).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n))),
    st.sampled_from(["{k}", " {k}. ", "#{k}", "{k})", "{k}:", "{k} - why not", "\n{k}\n"]),
    st.lists(st.text(max_size=15), min_size=20, max_size=20),
    st.booleans(),
)
def test_number_round_trip(nk: tuple[int, int], form: str, labels: list[str], is_explicit: bool) -> None:
    n, k = nk
    t = target(request_id="s:1", options=[(f"opt{i}", labels[i]) for i in range(n)])
    text = form.format(k=k)
    c = explicit(text) if is_explicit else plain(text)
    r = resolve(c, t, [t])
    assert isinstance(r, Answer) and r.option_id == f"opt{k - 1}"
    assert r.feedback == ("why not" if "why" in form else None)
    # and as a keycap, where one exists
    if k <= 10:
        rc = Candidate(
            "$r", ALICE, "reaction", PROMPT, None, None, KEYCAPS[k - 1], None, None, None, None, True
        )
        r2 = resolve(rc, t, [t])
        assert isinstance(r2, Answer) and r2.option_id == f"opt{k - 1}"


def test_long_input_is_fast() -> None:
    t = target(options=[(f"id{i}", "word " * 40) for i in range(20)])
    text = ("a" + " " * 5000) * 20 + "-" * 20000
    assert resolve(plain(text), t, [t]) is None
    assert resolve(explicit(text), t, [t]) is None  # many words: conversation
    r = resolve(plain("1" + " -" * 20000), t, [t])
    assert isinstance(r, Answer) and r.option_id == "id0"
