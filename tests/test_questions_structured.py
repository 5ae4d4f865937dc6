"""A structured answer to a question (issue 33), the pure parts: ``option_ids`` gives several choices of a
multi-select question, ``text`` the person's own words; bound to the prompt's digest and revision like any
structured answer, and an option the prompt does not offer is refused with a notice. No daemon."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from bot import answers
from bot.answers import ANSWER_KEY, classify, resolve
from bot.events.kinds import ANSWERED
from bot.inbox.record import Record
from bot.room.targets import as_target
from tests.test_questions import records, settled

FORM = "hook-PermissionRequest-AskUserQuestion"


def structured(rec: Record, **fields: Any) -> answers.Answer | answers.Refusal | None:
    """``fields`` (with ``subject`` the prompt's current one unless given) sent as a reply to ``rec``'s prompt."""
    payload = {"request_id": rec.id, "subject": {"digest": rec.digest, "revision": rec.revision}, **fields}
    event = {
        "type": "m.room.message",
        "sender": "@alice:hs",
        "event_id": "$a",
        "content": {
            "msgtype": "m.text",
            "body": "answer",
            ANSWER_KEY: payload,
            "m.relates_to": {"m.in_reply_to": {"event_id": "$p"}},
        },
    }
    cand = classify(event, bot_user_id="@bot:hs")
    assert cand is not None and cand.via == "structured"
    target = as_target(replace(rec, prompt_event_id="$p"))
    return resolve(cand, target, [target])


@pytest.mark.parametrize("ids", [["Docker", "CI"], ["CI", "Docker", "CI"]])
def test_several_choices_by_option_ids(ids: list[str]) -> None:
    _, extras = records(FORM)
    got = structured(extras, option_ids=ids, feedback="keep it small")
    assert isinstance(got, answers.Answer)
    assert (got.option_id, got.answer, got.chosen, got.feedback) == (
        ANSWERED,
        "Docker, CI",
        ("Docker", "CI"),
        "keep it small",
    )


def test_one_option_id_in_the_list_is_that_option() -> None:
    db, _ = records(FORM)
    got = structured(db, option_ids=["SQLite"])
    assert isinstance(got, answers.Answer) and (got.option_id, got.answer, got.chosen) == (
        "SQLite",
        "SQLite",
        ("SQLite",),
    )
    declined = structured(db, option_ids=["decline"])
    assert isinstance(declined, answers.Answer) and declined.option_id == "decline" and declined.answer is None


def test_free_text_by_text() -> None:
    db, _ = records(FORM)
    got = structured(db, text="  MySQL, please ")
    assert isinstance(got, answers.Answer)
    assert (got.option_id, got.answer, got.chosen) == (ANSWERED, "MySQL, please", ())


@pytest.mark.parametrize(
    ("which", "fields", "words"),
    [
        (1, {"option_ids": ["Docker", "Kubernetes"]}, "Option Kubernetes is not offered"),  # unknown option
        (1, {"option_ids": ["Docker", "decline"]}, "Decline cannot be given with choices"),
        (0, {"option_ids": ["Postgres", "SQLite"]}, "This question takes one choice"),
        (0, {"text": "x", "option_id": "Postgres"}, "give one of option_id, option_ids or text"),
        (0, {"option_ids": []}, "option_ids is not a list"),
        (0, {"option_ids": ["Postgres", 3]}, "not an option id"),
        (0, {"text": "   "}, "text is empty"),
        (0, {"text": 5}, "text is not text"),
        (0, {"text": "MySQL", "feedback": "why"}, "feedback goes with a choice"),
        (0, {"text": "MySQL", "subject": {"digest": "0" * 64}}, "has changed (its content)"),  # stale
        (0, {"option_ids": ["SQLite"], "subject": {"revision": 9}}, "has changed (its revision"),
    ],
)
def test_refused_with_a_notice(which: int, fields: dict[str, Any], words: str) -> None:
    rec = records(FORM)[which]
    got = structured(rec, **fields)
    assert isinstance(got, answers.Refusal) and words in got.message, got


def test_text_only_where_the_question_takes_it_and_never_on_a_permission() -> None:
    db, _ = records(FORM)
    closed = replace(db, raw_input={**db.raw_input, "freeText": False})
    got = structured(closed, text="MySQL")
    assert isinstance(got, answers.Refusal) and "takes no text of your own" in got.message
    assert "Postgres, SQLite, decline" in got.message
    perm = replace(db, kind="permission")
    assert isinstance(got := structured(perm, text="yes"), answers.Refusal) and "The prompt of" in got.message
    assert isinstance(got := structured(perm, option_ids=["Postgres", "SQLite"]), answers.Refusal)
    assert "takes one option_id" in got.message


def test_a_settled_question_is_not_answered_again() -> None:
    db, _ = records(FORM)
    done = settled(db, "Postgres", {"Which database should we use?": "Postgres"})
    for fields in ({"text": "MySQL"}, {"option_ids": ["SQLite"]}):
        got = structured(done, **fields)
        assert isinstance(got, answers.Refusal) and got.kind == "not_pending"
