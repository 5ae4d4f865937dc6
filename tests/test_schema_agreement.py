"""The models and the JSON Schema say the same thing: on the corpus, and on anything hypothesis makes."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from bot.events import Card, EventError, PermissionOption, PermissionV2, Subject, validate_content
from tests.support.schema import format_checker, load_schema, schema_verdict, unique_by_problem

CORPUS: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "fixtures" / "matrix-events" / "examples.json").read_text(encoding="utf-8")
)
VALID = [c["content"] for c in CORPUS if c["valid"]]

SEED_VALID = ["a command, with all four ACP option kinds", "built: a harness asks to run a command"]
SEED_REFUSED = [
    "an option with no meaning",
    "a subject of another schema",
    "no request_id: nothing an answer can name",
    "a subject revision that is not a whole number",
    "an expiry that is a date only",
    "an expiry written as a person would",
    "an expiry with no offset",
    "an expiry with no seconds",
    "an expiry with a space for the T",
    "an expiry whose offset has no colon",
    "an expiry in lower case",
    "an expiry on a day the month does not have",
    "no options: nothing to answer with",
    "twenty-one options: more than any decision card carries",
]


def model_verdict(obj: object) -> str | None:
    try:
        validate_content(obj)
    except EventError as exc:
        return str(exc)
    return None


# --- the schema and the corpus --------------------------------------------------------------------------


def test_schema_is_draft_2020_12_with_unique_by() -> None:
    schema = load_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["x-uniqueBy"] == ["options[].id"]
    assert schema["properties"]["subject"] == {"$ref": "#/$defs/subject"}
    assert schema["$defs"]["subject"]["properties"]["expires_at"]["format"] == "date-time"


@pytest.mark.parametrize(
    ("model", "pointer"),
    [
        (PermissionV2, ()),
        (PermissionOption, ("$defs", "option")),
        (Subject, ("$defs", "subject")),
        (Card, ("$defs", "card")),
    ],
)
def test_schema_and_models_name_the_same_fields(model: type[Any], pointer: tuple[str, ...]) -> None:
    node: Any = load_schema()
    for key in pointer:
        node = node[key]
    fields = {f.alias or name: f for name, f in model.model_fields.items()}
    assert set(node["properties"]) == set(fields)
    assert set(node["required"]) == {name for name, f in fields.items() if f.is_required()}


def test_format_checker_knows_date_time() -> None:
    checker = format_checker()
    assert checker.conforms("2026-11-07T10:30:00.000Z", "date-time")
    assert not checker.conforms("2026-02-29T10:30:00Z", "date-time")
    assert checker.conforms(12, "date-time")  # not a string: the "type" keyword's business
    validator = Draft202012Validator({"type": "string", "format": "date-time"}, format_checker=checker)
    assert not validator.is_valid("2026-11-07 10:30:00Z")


def test_unique_by() -> None:
    doc = {"options": [{"id": "a"}, {"id": "b"}, {"id": "a"}], "other": 1}
    assert unique_by_problem(doc, ["options[].id"]) == 'options[2].id: repeats "a"'
    assert unique_by_problem({"options": [{"id": "a"}, {"x": "a"}, 5]}, ["options[].id"]) is None
    assert unique_by_problem({"options": "nope"}, ["options[].id"]) is None
    assert unique_by_problem({"a": {"b": [{"c": 1}, {"c": 1}]}}, ["a.b[].c"]) == "a.b[1].c: repeats 1"


def test_corpus_shape() -> None:
    names = [c["name"] for c in CORPUS]
    assert len(names) == len(set(names))
    by_name = {c["name"]: c for c in CORPUS}
    for name in SEED_VALID:
        assert by_name[name]["valid"] is True
    for name in SEED_REFUSED:
        assert by_name[name]["valid"] is False
    own = [c for c in CORPUS if c["name"] not in SEED_VALID + SEED_REFUSED]
    assert len(own) >= 10 and any(c["valid"] for c in own) and any(not c["valid"] for c in own)
    for case in CORPUS:
        assert set(case) <= {"name", "valid", "reason", "content"}
        assert isinstance(case["content"], dict)
        if not case["valid"]:
            assert case.get("reason")


@pytest.mark.parametrize("case", CORPUS, ids=[c["name"] for c in CORPUS])
def test_corpus_case(case: dict[str, Any]) -> None:
    by_model, by_schema = model_verdict(case["content"]), schema_verdict(case["content"])
    assert (by_model is None) == case["valid"], by_model
    assert (by_schema is None) == case["valid"], by_schema
    if not case["valid"]:
        assert by_model is not None
        # the corpus reason and the model's message name the same field
        path = by_model.split(": ", 1)[0]
        assert path.split("[")[0].split(".")[-1] in case["reason"] or path in case["reason"]


# --- hypothesis: models and schema always agree ---------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.integers()
    | st.sampled_from([1.0, 0.0, -1.0, 1.5, 1e300])
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.sampled_from(["", "x" * 200, "x" * 201, "m.text", "approve", "once", "field", "text", "harness-permission/v1"])
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
timestamps = st.one_of(
    st.from_regex(
        r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}(:[0-9]{2})?(\.[0-9]{0,4})?([Zz]|[+-][0-9]{2}:?[0-9]{2})?",
        fullmatch=True,
    ),
    st.text(max_size=30),
    st.sampled_from(["2026-11-07T10:30:00.000Z", "2028-02-29T10:30:00Z", "2026-12-31T23:59:60Z"]),
)
option_ids = st.sampled_from(["a", "b", "allow", "", "x" * 200, "x" * 201]) | st.text(max_size=4)
options_st = st.lists(
    st.fixed_dictionaries(
        {
            "id": option_ids,
            "label": st.text(max_size=4) | st.just("y" * 201),
            "meaning": st.sampled_from(["approve", "reject", "choose", "allow"]),
        },
        optional={"scope": st.sampled_from(["once", "always", "never"]) | json_values, "extra": json_values},
    )
    | json_values,
    max_size=22,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, (*prefix, index))
    return out


@st.composite
def mutated(draw: st.DrawFn) -> Any:
    """A valid corpus content with one to three random edits."""
    doc = copy.deepcopy(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent: Any = doc
        for key in path[:-1]:
            parent = parent[key]
        last = path[-1]
        action = draw(st.sampled_from(["delete", "replace", "timestamp", "options", "add"]))
        if action == "delete":
            if isinstance(parent, dict):
                del parent[last]
            else:
                parent.pop(last)
        elif action == "replace":
            parent[last] = draw(json_values)
        elif action == "timestamp":
            doc.setdefault("subject", {})
            if isinstance(doc["subject"], dict):
                doc["subject"]["expires_at"] = draw(timestamps)
        elif action == "options":
            doc["options"] = draw(options_st)
        elif isinstance(parent, dict):
            parent[draw(st.text(max_size=6))] = draw(json_values)
    return doc


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_models_and_schema_agree_on_mutations(doc: Any) -> None:
    by_model, by_schema = model_verdict(doc), schema_verdict(doc)
    assert (by_model is None) == (by_schema is None), (by_model, by_schema)


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_models_and_schema_agree_on_any_json(doc: Any) -> None:
    assert (model_verdict(doc) is None) == (schema_verdict(doc) is None)


@settings(max_examples=200, deadline=None)
@given(timestamps, st.sampled_from(VALID))
def test_models_and_schema_agree_on_timestamps(stamp: str, base: dict[str, Any]) -> None:
    doc = copy.deepcopy(base)
    doc["subject"]["expires_at"] = stamp
    by_model, by_schema = model_verdict(doc), schema_verdict(doc)
    assert (by_model is None) == (by_schema is None), (by_model, by_schema)


@settings(max_examples=200, deadline=None)
@given(options_st, st.sampled_from(VALID))
def test_models_and_schema_agree_on_option_lists(options: list[Any], base: dict[str, Any]) -> None:
    doc = copy.deepcopy(base)
    doc["options"] = options
    by_model, by_schema = model_verdict(doc), schema_verdict(doc)
    assert (by_model is None) == (by_schema is None), (by_model, by_schema)
