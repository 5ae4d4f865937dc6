"""bot.door.forms: an elicitation's schema as questions, the room's answers as its content (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from bot.door import forms
from bot.door.forms import Answered
from bot.events.kinds import check_question_options, question_of

A101 = {  # captured/acp101-elicitation-create-AskUserQuestion.json's requestedSchema
    "type": "object",
    "properties": {
        "question_0": {"type": "string", "title": "Database", "description": "Which database should we use?",
                       "oneOf": [{"const": "Postgres", "title": "Postgres", "description": "Relational, server based"},
                                 {"const": "SQLite", "title": "SQLite", "description": "Single file, no server"}]},
        "question_0_custom": {"type": "string", "title": "Other", "description": "Type your own answer"},
        "question_1": {"type": "array", "title": "Extras", "description": "Which extras do you want?",
                       "items": {"anyOf": [{"const": "Docker", "title": "Docker"}, {"const": "CI", "title": "CI"}]}},
        "question_1_custom": {"type": "string", "title": "Other", "description": "Add to your selection"},
    },
}


def test_a101_form_pairs_other_fields_with_their_question() -> None:
    f = forms.form_of(A101)
    assert [(a.key, a.kind, a.custom) for a in f.asks] == [
        ("question_0", "single", "question_0_custom"), ("question_1", "multi", "question_1_custom")]
    a = f.asks[0]
    assert a.text == "Which database should we use?" and a.header == "Database" and a.free_text
    body = forms.question_body(a, session_id="s", tool_call_id="t#question_0", index=1, count=2)
    assert body["toolCall"]["kind"] == "question"
    q = question_of(body["toolCall"]["rawInput"])  # the daemon's reading of it
    assert q.text == a.text and q.descriptions == {"Postgres": "Relational, server based",
                                                   "SQLite": "Single file, no server"}
    check_question_options(body["options"])
    assert [o["optionId"] for o in body["options"]] == ["Postgres", "SQLite", "decline"]


def test_order_kinds_and_refusals() -> None:
    props: dict[str, Any] = {
        "b": {"type": "boolean"}, "n": {"type": "number", "minimum": 0, "maximum": 10},
        "e": {"type": "string", "enum": ["x", "y"]}, "m": {"type": "array", "items": {"enum": ["p", "q"]}},
        "odd": {"type": "_custom"},
    }
    f = forms.form_of({"properties": props, "property_order": ["n", "e"]})
    assert [a.key for a in f.asks] == ["n", "e", "b", "m"]  # "odd", optional, is left out
    assert [c.label for c in f.asks[2].choices] == ["Yes", "No"] and not f.asks[2].free_text
    with pytest.raises(forms.BadForm, match="odd"):
        forms.form_of({"properties": props, "required": ["odd"]})
    with pytest.raises(forms.BadForm):
        forms.form_of({"properties": {}})
    with pytest.raises(forms.BadForm, match="at most"):
        forms.form_of({"properties": {f"q{i}": {"type": "string"} for i in range(forms.MAX_QUESTIONS + 1)}})


def test_numbers() -> None:
    n = forms.Ask("n", "number", "Ratio?", minimum=0, maximum=10)
    i = forms.Ask("i", "integer", "Workers?", minimum=1)
    assert forms.number_of(n, "2.5") == 2.5 and forms.number_of(n, "3") == 3 and forms.number_of(i, "4.0") == 4
    assert "not a number" in str(forms.number_of(n, "many"))
    assert "not a number" in str(forms.number_of(n, "nan"))
    assert "whole" in str(forms.number_of(i, "1.5"))
    assert "minimum" in str(forms.number_of(i, "0")) and "maximum" in str(forms.number_of(n, "11"))


def test_values() -> None:
    single, multi = forms.form_of(A101).asks
    assert forms.value_of(single, Answered("SQLite", ["SQLite"], "SQLite")) == {"question_0": "SQLite"}
    assert forms.value_of(single, Answered("answer", [], "MySQL, please")) == {"question_0_custom": "MySQL, please"}
    assert forms.value_of(single, Answered("Postgres", ["Postgres"], "Postgres", feedback="keep it small")) == {
        "question_0": "Postgres", "question_0_custom": "keep it small"}
    assert forms.value_of(multi, Answered("answer", ["Docker", "CI"], "Docker, CI")) == {
        "question_1": ["Docker", "CI"]}
    b = forms.Ask("b", "boolean", "Fast?", choices=(forms.Choice("yes", "Yes"), forms.Choice("no", "No")))
    assert forms.value_of(b, Answered("no", ["no"], "No")) == {"b": False}
    t = forms.Ask("t", "text", "Name?")
    assert forms.value_of(t, Answered("answer", [], "pb")) == {"t": "pb"}
    assert isinstance(forms.value_of(forms.Ask("i", "integer", "N?"), Answered("answer", [], "x")), str)


def test_records_and_url() -> None:
    rec = {"state": "resolved", "outcome": {"option_id": "answer", "answers": {"Q?": "Docker, CI"},
                                            "chosen": ["Docker", "CI"], "feedback": None}}
    assert forms.answered(rec) == Answered("answer", ["Docker", "CI"], "Docker, CI")
    assert forms.answered({"state": "expired", "outcome": {"option_id": "decline"}}).option_id is None
    f = forms.url_form("Sign in", "https://auth.example.com/x?y=1")
    (a,) = f.asks
    assert a.text == "Sign in" and a.url == "https://auth.example.com/x?y=1"  # the daemon shows link and host
    assert [c.value for c in a.choices] == ["done"] and not a.free_text
    body = forms.question_body(a, session_id="s", tool_call_id="t", index=1, count=1)
    assert body["toolCall"]["rawInput"]["url"] == "https://auth.example.com/x?y=1"


def test_url_mode_refuses_a_link_read_otherwise_by_a_browser() -> None:
    for bad in ("https://evil.example\\@good.example/login", "https://good.example@evil.example/",
                "https://good.example\t.evil.example/", "https://0x7f.1/", "https://good%2eexample/",
                "https:evil.example"):
        with pytest.raises(forms.BadForm, match="refused"):
            forms.url_form("Sign in", bad)
    (a,) = forms.url_form("Sign in", "https://\u0430pple.com/login").asks  # a Cyrillic a: kept, shown marked
    assert a.url == "https://\u0430pple.com/login"


def test_url_mode_posts_web_links_only() -> None:
    for bad in ("javascript:alert(1)", "file:///etc/passwd", "data:text/html,hi", "https:///nohost"):
        with pytest.raises(forms.BadForm, match="url"):
            forms.url_form("Sign in", bad)


def test_multiple_choice_item_counts() -> None:
    props = {"m": {"type": "array", "minItems": 2, "maxItems": 2, "items": {"enum": ["a", "b", "c"]}}}
    (m,) = forms.form_of({"properties": props}).asks
    assert forms.value_of(m, Answered("a", ["a"], "a")) == "choose at least 2"
    assert forms.value_of(m, Answered("answer", ["a", "b", "c"], "a, b, c")) == "choose at most 2"
    assert forms.value_of(m, Answered("answer", ["a", "c"], "a, c")) == {"m": ["a", "c"]}
