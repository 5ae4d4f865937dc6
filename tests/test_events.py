"""bot.events: strict RFC 3339, the v2 models, error messages, the structured answer."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.events import (
    ANSWER_KEY,
    EventError,
    PermissionV2,
    answer_from_content,
    format_utc_ms,
    is_rfc3339,
    parse_rfc3339,
    validate_answer,
    validate_content,
)

CORPUS = json.loads(
    (Path(__file__).parent / "fixtures" / "matrix-events" / "examples.json").read_text(encoding="utf-8")
)
SEED = next(c["content"] for c in CORPUS if c["name"] == "a command, with all four ACP option kinds")
BUILT = next(c["content"] for c in CORPUS if c["name"] == "built: a harness asks to run a command")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10,
)


def changed(base: dict[str, Any], *path: str | int, value: Any = None, delete: bool = False) -> dict[str, Any]:
    """A deep copy of ``base`` with the value at ``path`` replaced (or deleted)."""
    out = copy.deepcopy(base)
    node: Any = out
    for key in path[:-1]:
        node = node[key]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


def refusal(obj: object) -> str:
    with pytest.raises(EventError) as info:
        validate_content(obj)
    return str(info.value)


# --- timestamps -----------------------------------------------------------------------------------------

ACCEPTED = [
    "2026-11-07T10:30:00.000Z",
    "2026-11-07T10:30:00Z",
    "2026-11-07T10:30:00.1Z",
    "2026-11-07T10:30:00.123456789012Z",
    "2026-11-07T10:30:00+05:30",
    "2026-11-07T10:30:00.5-08:00",
    "2026-11-07T10:30:00-00:00",
    "2028-02-29T00:00:00Z",
    "2000-02-29T23:59:59Z",
    "2026-01-31T00:00:00Z",
    "2026-12-31T23:59:60Z",
    "2026-12-31T15:59:60-08:00",
    "0000-01-01T00:00:00Z",
    "9999-12-31T23:59:59.999Z",
]
REFUSED = [
    "2026-11-07",  # date only
    "Nov 7 2026 10:30",  # human
    "2026-11-07T10:30:00.000",  # no offset
    "2026-11-07T10:30Z",  # no seconds
    "2026-11-07 10:30:00Z",  # space for the T
    "2026-11-07T10:30:00+0100",  # offset without colon
    "2026-11-07t10:30:00Z",  # lower-case t
    "2026-11-07T10:30:00z",  # lower-case z
    "2026-02-29T10:30:00Z",  # not a leap year
    "1900-02-29T10:30:00Z",  # century, not a leap year
    "2026-04-31T10:30:00Z",  # April has 30 days
    "2026-00-10T10:30:00Z",
    "2026-13-10T10:30:00Z",
    "2026-11-00T10:30:00Z",
    "2026-11-07T24:00:00Z",
    "2026-11-07T10:60:00Z",
    "2026-11-07T10:30:61Z",
    "2026-11-07T10:30:60Z",  # a leap second only at 23:59:60 UTC
    "2026-12-31T23:59:60+01:00",
    "2026-11-07T10:30:00+24:00",
    "2026-11-07T10:30:00+01:60",
    "2026-11-07T10:30:00.Z",
    "2026-11-07T10:30:00,5Z",
    "2026-11-07T10:30:00+01",
    "2026-11-07T10:30:00 Z",
    " 2026-11-07T10:30:00Z",
    "2026-11-07T10:30:00Z\n",
    "26-11-07T10:30:00Z",
    "+2026-11-07T10:30:00Z",
    "2026-1-07T10:30:00Z",
    "٢٠٢٦-11-07T10:30:00Z",  # non-ASCII digits
    "2026-11-07T10:30:00UTC",
    "",
]


@pytest.mark.parametrize("text", ACCEPTED)
def test_rfc3339_accepts(text: str) -> None:
    assert is_rfc3339(text)


@pytest.mark.parametrize("text", REFUSED)
def test_rfc3339_refuses(text: str) -> None:
    assert not is_rfc3339(text)
    with pytest.raises(ValueError):
        parse_rfc3339(text)


@pytest.mark.parametrize("value", [None, 20261107, 1.5, b"2026-11-07T10:30:00Z", ["2026-11-07T10:30:00Z"]])
def test_rfc3339_refuses_non_strings(value: object) -> None:
    assert not is_rfc3339(value)


def test_parse_rfc3339() -> None:
    assert parse_rfc3339("2026-11-07T10:30:00.123456789+05:30") == datetime(2026, 11, 7, 5, 0, 0, 123456, tzinfo=UTC)
    assert parse_rfc3339("2026-12-31T23:59:60Z") == datetime(2027, 1, 1, tzinfo=UTC)
    with pytest.raises(ValueError):
        parse_rfc3339("0000-01-01T00:00:00Z")  # valid RFC 3339, but no Python datetime holds it


def test_format_utc_ms() -> None:
    assert format_utc_ms(datetime(2026, 11, 7, 10, 30, tzinfo=UTC)) == "2026-11-07T10:30:00.000Z"
    assert format_utc_ms(datetime(2026, 11, 7, 10, 30)) == "2026-11-07T10:30:00.000Z"  # naive is UTC
    plus2 = timezone(timedelta(hours=2))
    assert format_utc_ms(datetime(2026, 11, 7, 0, 30, 5, 999999, tzinfo=plus2)) == "2026-11-06T22:30:05.999Z"
    assert format_utc_ms(datetime(5, 1, 2, tzinfo=UTC)) == "0005-01-02T00:00:00.000Z"


@given(st.floats(min_value=-6e10, max_value=2.5e11) | st.integers(0, 4 * 10**9).map(lambda n: n / 1000))
def test_iso_ms_is_format_utc_ms_of_the_instant(ts: float) -> None:
    from bot.events.timestamps import iso_ms, to_datetime

    assert iso_ms(ts) == format_utc_ms(to_datetime(ts))  # the listing's fast path writes the same text


fixed_zones = st.builds(lambda m: timezone(timedelta(minutes=m)), st.integers(-1439, 1439))


@given(st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31), timezones=fixed_zones))
def test_formatted_datetimes_are_rfc3339_and_round_trip(when: datetime) -> None:
    text = format_utc_ms(when)
    assert is_rfc3339(text)
    assert parse_rfc3339(text) == when.replace(microsecond=when.microsecond // 1000 * 1000)


@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)), st.integers(-1439, 1439))
def test_isoformat_with_offsets_is_rfc3339(when: datetime, minutes: int) -> None:
    aware = when.replace(tzinfo=timezone(timedelta(minutes=minutes)))
    text = aware.isoformat().replace("+00:00", "Z")
    assert is_rfc3339(text)
    assert parse_rfc3339(text) == aware


@given(
    st.from_regex(
        r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})",
        fullmatch=True,
    )
)
def test_rfc3339_calendar_agrees_with_python(text: str) -> None:
    """Where Python can hold the value (no leap second, year > 0), its calendar and ours agree."""
    if text[17:19] == "60" or text.startswith("0000"):
        return
    if not text.endswith("Z") and int(text[-2:]) > 59:
        assert not is_rfc3339(text)  # RFC 3339 offsets have minutes 00-59; Python takes up to 99
        return
    try:
        datetime.fromisoformat(text)
        python_ok = True
    except ValueError:
        python_ok = False
    assert is_rfc3339(text) == python_ok


# --- the v2 models --------------------------------------------------------------------------------------


def test_seed_examples_are_valid() -> None:
    model = validate_content(SEED)
    assert isinstance(model, PermissionV2)
    assert model.request_id == "acps_3f0c:12"
    assert model.subject.schema_ == "harness-permission/v1"
    assert model.card is not None and model.card.options[0].option_id == "allow_once"
    assert [(o.meaning, o.scope) for o in model.options] == [
        ("approve", "once"),
        ("approve", "always"),
        ("reject", "once"),
        ("reject", "always"),
    ]
    assert "reject_once" in {o.id for o in model.options} and "nope" not in {o.id for o in model.options}
    validate_content(BUILT)


def test_unknown_properties_are_kept() -> None:
    content = changed(SEED, "x-future", value={"a": [1]})
    content["options"][0]["style"] = "primary"
    content["subject"]["risk"] = "low"
    content["subject"]["preview"][0]["lang"] = "sh"
    content["dev.agentpod.permission"]["extra"] = True
    model = validate_content(content)
    assert model.model_extra == {"x-future": {"a": [1]}}
    assert model.options[0].model_extra == {"style": "primary"}
    assert model.subject.model_extra == {"risk": "low"}
    dumped = model.model_dump(mode="json", by_alias=True, exclude_unset=True)
    assert dumped == content


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("schema_version",), "1", 'schema_version: must be a whole number (got "1")'),
        (("schema_version",), True, "schema_version: must be a whole number (got true)"),
        (("request_seq",), 1.5, "request_seq: must be a whole number (got 1.5)"),
        (("subject", "revision"), "1", 'subject.revision: must be a whole number (got "1")'),
        (("subject", "revision"), True, "subject.revision: must be a whole number (got true)"),
        (("subject", "revision"), 1.5, "subject.revision: must be a whole number (got 1.5)"),
        (("request_id",), 7, "request_id: must be a string (got 7)"),
        (("title",), None, "title: must be a string (got null)"),
        (("subject", "preview_complete"), 1, "subject.preview_complete: must be true or false (got 1)"),
        (("options", 0, "label"), 5, "options[0].label: must be a string (got 5)"),
    ],
)
def test_no_coercion(path: tuple[str | int, ...], value: object, message: str) -> None:
    assert refusal(changed(SEED, *path, value=value)) == message


def test_integral_json_numbers_are_integers() -> None:
    """``1.0`` is the integer 1 in JSON Schema; the models agree."""
    model = validate_content(changed(SEED, "subject", "revision", value=1.0))
    assert model.subject.revision == 1 and isinstance(model.subject.revision, int)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            changed(SEED, "subject", "expires_at", value="2026-11-07"),
            'subject.expires_at: not an RFC 3339 date-time ("2026-11-07")',
        ),
        (changed(SEED, "options", value=[]), "options: at least 1 item"),
        (changed(SEED, "options", value=[SEED["options"][0]] * 21), "options: at most 20 items"),
        (changed(BUILT, "options", 1, "id", value="allow"), 'options[1].id: repeats "allow"'),
        (changed(SEED, "request_id", delete=True), "request_id: required"),
        (changed(SEED, "request_id", value=""), "request_id: at least 1 character"),
        (changed(SEED, "options", 2, "id", value="x" * 201), "options[2].id: at most 200 characters"),
        (changed(SEED, "options", 0, "meaning", delete=True), "options[0].meaning: required"),
        (
            changed(SEED, "options", 0, "meaning", value="allow"),
            'options[0].meaning: must be "approve", "reject" or "choose" (got "allow")',
        ),
        (
            changed(SEED, "subject", "schema", value="other/v1"),
            'subject.schema: must be "harness-permission/v1" (got "other/v1")',
        ),
        (changed(SEED, "subject", "preview", 1, "value", delete=True), "subject.preview[1].value: required"),
        (
            changed(SEED, "subject", "preview", 2, "type", value="image"),
            'subject.preview[2].type: must be "field" or "text" (got "image")',
        ),
        (
            changed(SEED, "subject", "preview", 2, "type", delete=True),
            'subject.preview[2]: needs a "type": "field" or "text"',
        ),
        (changed(SEED, "subject", "preview", 0, value="Tool"), 'subject.preview[0]: must be an object (got "Tool")'),
        (changed(SEED, "tool_kind", value=None), "tool_kind: must not be null"),
        (changed(SEED, "subject", value=[]), "subject: must be an object (got a list)"),
        (
            changed(SEED, "dev.agentpod.permission", "options", 3, "option_id", value=""),
            "dev.agentpod.permission.options[3].option_id: at least 1 character",
        ),
        (
            changed(SEED, "dev.agentpod.permission", "schema_version", value=0),
            "dev.agentpod.permission.schema_version: at least 1 (got 0)",
        ),
        (changed(SEED, "title", value="bad \ud800"), "title: not valid Unicode (a lone surrogate)"),
        (changed(SEED, "x", value={"key \ud800\n": 1}), "x: not valid Unicode (a lone surrogate)"),
        (
            changed(SEED, "a b", value={"c\nd": {"e": "\udfff"}}),
            '["a b"]["c\\nd"].e: not valid Unicode (a lone surrogate)',
        ),
        ([SEED], "content: must be a JSON object (got a list)"),
        ("{}", 'content: must be a JSON object (got "{}")'),
    ],
)
def test_refusals_name_the_field(content: object, message: str) -> None:
    assert refusal(content) == message


def test_event_error_carries_path_and_reason() -> None:
    with pytest.raises(EventError) as info:
        validate_content(changed(SEED, "session_id", value=""))
    assert info.value.path == "session_id"
    assert info.value.reason == "at least 1 character"
    assert isinstance(info.value, ValueError)


def test_models_are_frozen() -> None:
    model = validate_content(SEED)
    with pytest.raises(Exception):  # noqa: B017 - pydantic's ValidationError on assignment
        model.title = "changed"  # type: ignore[misc]


def test_deep_unknown_values_are_fine() -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    validate_content(changed(SEED, "x-deep", value=deep))
    assert refusal(changed(SEED, "title", value=deep)) == "title: must be a string (got a list)"


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_any_json_gets_a_one_line_verdict(value: object) -> None:
    for candidate in (value, changed(SEED, "title", value=value), changed(SEED, "subject", "revision", value=value)):
        try:
            validate_content(candidate)
        except EventError as exc:
            text = str(exc)
            assert "\n" not in text and text.startswith(exc.path + ": ") and exc.reason


# --- the structured answer ------------------------------------------------------------------------------


def test_answer_valid() -> None:
    answer = validate_answer(
        {"request_id": "s:1", "option_id": "allow_once", "subject": {"digest": "ab", "revision": 2}, "feedback": "ok"}
    )
    assert (answer.request_id, answer.option_id, answer.feedback) == ("s:1", "allow_once", "ok")
    assert answer.subject is not None and (answer.subject.digest, answer.subject.revision) == ("ab", 2)
    bare = validate_answer({"request_id": "s:1", "option_id": "x", "feedback": None, "other": 1})
    assert bare.subject is None and bare.feedback is None and bare.model_extra == {"other": 1}
    several = validate_answer({"request_id": "s:1", "option_ids": ["Docker", "CI"]})
    assert several.option_ids == ["Docker", "CI"] and several.option_id is None and several.text is None
    assert validate_answer({"request_id": "s:1", "text": "MySQL, please"}).text == "MySQL, please"


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"request_id": "s:1"}, f"{ANSWER_KEY}: needs exactly one of option_id, option_ids or text"),
        ({"request_id": "s:1", "option_id": "x", "text": "t"},
         f"{ANSWER_KEY}: needs exactly one of option_id, option_ids or text"),
        ({"request_id": "s:1", "option_ids": []}, f"{ANSWER_KEY}.option_ids: at least 1 item"),
        ({"request_id": "s:1", "option_ids": ["a", ""]}, f"{ANSWER_KEY}.option_ids[1]: at least 1 character"),
        ({"request_id": "", "option_id": "x"}, f"{ANSWER_KEY}.request_id: at least 1 character"),
        (
            {"request_id": "s:1", "option_id": "x", "subject": {"revision": "1"}},
            f'{ANSWER_KEY}.subject.revision: must be a whole number (got "1")',
        ),
        ({"request_id": "s:1", "option_id": "x", "feedback": 3}, f"{ANSWER_KEY}.feedback: must be a string (got 3)"),
        ("allow", f'{ANSWER_KEY}: must be an object (got "allow")'),
    ],
)
def test_answer_refused(obj: object, message: str) -> None:
    with pytest.raises(EventError) as info:
        validate_answer(obj)
    assert str(info.value) == message


def test_answer_from_content() -> None:
    assert answer_from_content({"msgtype": "m.text", "body": "1"}) is None
    found = answer_from_content({"body": "x", ANSWER_KEY: {"request_id": "s:1", "option_id": "a"}})
    assert found is not None and found.option_id == "a"
    with pytest.raises(EventError):
        answer_from_content({ANSWER_KEY: None})


def test_importing_events_does_not_need_jsonschema() -> None:
    """jsonschema is a test dependency: the runtime import of bot.events must not pull it in."""
    code = "import sys, bot.events, bot.prompts; raise SystemExit('jsonschema' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
