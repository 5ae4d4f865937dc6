"""bot.prompts: digest, option meanings, the prompt, the settled edit."""

from __future__ import annotations

import copy
import hashlib
import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.events import validate_content
from bot.events.ledger import option_meaning
from bot.prompts import build_prompt, build_settled, edit_content
from bot.prompts.build import CONTENT_BUDGET
from bot.prompts.message import answer_hint
from bot.prompts.options import by_meaning
from bot.util.digest import digest_params
from tests.support.schema import schema_verdict

CORPUS = json.loads(
    (Path(__file__).parent / "fixtures" / "matrix-events" / "examples.json").read_text(encoding="utf-8")
)
SEED = next(c["content"] for c in CORPUS if c["name"] == "a command, with all four ACP option kinds")
ACP_OPTIONS = [
    {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
    {"optionId": "reject_always", "name": "Never allow", "kind": "reject_always"},
]
EXPIRES = datetime(2026, 11, 7, 10, 30, tzinfo=UTC)
DECIDED = datetime(2026, 11, 7, 10, 2, 3, 456789, tzinfo=UTC)


def prompt(**overrides: Any) -> dict[str, Any]:
    """build_prompt with the seed example's inputs, some replaced."""
    kwargs: dict[str, Any] = {
        "request_id": "acps_3f0c:12",
        "session_id": "acps_3f0c",
        "request_seq": 12,
        "title": "Run the test suite",
        "tool_kind": "execute",
        "options": copy.deepcopy(ACP_OPTIONS),
        "raw_input": {"command": "bun test"},
        "locations": [{"path": "apps/hub"}],
        "content": [],
        "digest": SEED["subject"]["digest"],
        "revision": 1,
        "expires_at": EXPIRES,
    }
    kwargs.update(overrides)
    return build_prompt(**kwargs)


def preview(content: dict[str, Any]) -> list[dict[str, str]]:
    items: list[dict[str, str]] = content["subject"]["preview"]
    return items


# --- digest and meanings --------------------------------------------------------------------------------


def test_digest_params() -> None:
    params = {"sessionId": "s", "toolCall": {"toolCallId": "c1", "rawInput": {"command": "é"}}, "options": [1.0]}
    canonical = '{"options":[1],"sessionId":"s","toolCall":{"rawInput":{"command":"é"},"toolCallId":"c1"}}'
    assert digest_params(params) == hashlib.sha256(canonical.encode()).hexdigest()
    reordered = {"toolCall": {"rawInput": {"command": "é"}, "toolCallId": "c1"}, "options": [1], "sessionId": "s"}
    assert digest_params(reordered) == digest_params(params)
    assert len(digest_params({})) == 64 and digest_params({}) == digest_params({}).lower()
    with pytest.raises(ValueError):
        digest_params({"x": float("nan")})


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("allow_once", ("approve", "once")),
        ("allow_always", ("approve", "always")),
        ("reject_once", ("reject", "once")),
        ("reject_always", ("reject", "always")),
        ("allow_edits", ("choose", None)),
        ("", ("choose", None)),
        ("ALLOW_ONCE", ("choose", None)),
    ],
)
def test_option_meaning(kind: str, expected: tuple[str, str | None]) -> None:
    assert option_meaning(kind) == expected


# --- the prompt -----------------------------------------------------------------------------------------


def test_seed_example_is_built_exactly() -> None:
    """The seed's example, but for what CONTRACT.md now asks of the prose and the preview (labels from
    facts: no tool name was sent, so no Tool line; the body carries the command)."""
    built = prompt()
    assert built["body"] == (
        "Permission needed: Run the test suite\nKind: execute\nCommand:\n│ bun test\nLocation: apps/hub\n\n"
        "1. Allow once\n2. Always allow\n3. Reject\n4. Never allow\n\n" + answer_hint(3)
    )
    seed = copy.deepcopy(SEED)
    seed["subject"]["preview"] = [i for i in seed["subject"]["preview"] if i["label"] != "Tool"]
    assert {k: v for k, v in built.items() if k not in ("body", "format", "formatted_body", "m.mentions")} == {
        k: v for k, v in seed.items() if k != "body"
    }
    assert list(built)[:5] == ["msgtype", "body", "format", "formatted_body", "m.mentions"]
    assert built["format"] == "org.matrix.custom.html" and built["m.mentions"] == {}
    validate_content(built)
    assert schema_verdict(built) is None


def test_formatted_body() -> None:
    html = prompt()["formatted_body"]
    assert html.startswith("<p><strong>Permission needed:</strong> Run the test suite</p>")
    assert "<pre><code>bun test</code></pre>" in html
    assert "<ol><li>Allow once</li><li>Always allow</li><li>Reject</li><li>Never allow</li></ol>" in html
    assert html.endswith("<p>Reply with the number (3 denies), or the option's name.</p>")
    assert "<code>apps/hub</code>" in html


def test_html_is_escaped() -> None:
    built = prompt(
        title="<script>alert(1)</script> & co",
        options=[{"optionId": "a", "name": "<b>Yes</b>", "kind": "allow_once"}],
        raw_input={"command": "echo '<x>' && cat a > b"},
        content=[{"type": "diff", "path": "a<b>.html", "oldText": "<p>\n", "newText": "<div>\n"}],
    )
    html = built["formatted_body"]
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co" in html
    assert "<b>Yes</b>" not in html and "&lt;b&gt;Yes&lt;/b&gt;" in html
    assert "<pre><code>echo '&lt;x&gt;' &amp;&amp; cat a &gt; b</code></pre>" in html
    assert "-&lt;p&gt;" in html and "+&lt;div&gt;" in html
    assert built["title"] == "<script>alert(1)</script> & co"  # the wire keeps the text as it is


def test_command_forms() -> None:
    listed = prompt(raw_input={"command": ["bash", "-lc", "bun test"], "cwd": "/w"})
    assert {"type": "text", "label": "Command", "text": "bash -lc 'bun test'"} in preview(listed)
    with_args = prompt(raw_input={"command": "bun", "args": ["test", "--watch"]})
    assert {"type": "text", "label": "Command", "text": "bun test --watch"} in preview(with_args)
    other = prompt(raw_input={"file_path": "a.py", "limit": 3})
    assert {"type": "text", "label": "Input", "text": '{"file_path":"a.py","limit":3}'} in preview(other)
    for nothing in (None, {}):  # an execute request without raw input: the title is the command
        assert {"type": "text", "label": "Command", "text": "Run the test suite"} in preview(prompt(raw_input=nothing))
        read = prompt(raw_input=nothing, tool_kind="read")
        assert all(i["label"] not in ("Command", "Input") for i in preview(read))


def test_preview_items_in_order() -> None:
    built = prompt(
        raw_input={"command": "sed -i s/a/b/ x.py"},
        locations=[{"path": "x.py", "line": 3}, {"path": "y.py"}, {"nope": 1}, "junk"],
        content=[
            {"type": "diff", "path": "x.py", "oldText": "a\nb\n", "newText": "a\nc\n"},
            {"type": "content", "content": {"type": "text", "text": "Replaces b by c."}},
            {"type": "terminal", "terminalId": "t1"},
        ],
        tool_name="Bash",
    )
    labels = [i["label"] for i in preview(built)]
    assert labels == ["Tool", "Kind", "Command", "Diff: x.py", "Details", "Location", "Location"]
    assert preview(built)[0] == {"type": "field", "label": "Tool", "value": "Bash"}
    diff = preview(built)[3]["text"]
    assert diff.startswith("--- x.py\n+++ x.py\n@@") and "-b\n+c" in diff
    assert [i["value"] for i in preview(built) if i["label"] == "Location"] == ["x.py:3", "y.py"]
    assert built["subject"]["preview_complete"] is True


def test_new_file_diff() -> None:
    built = prompt(content=[{"type": "diff", "path": "new.txt", "oldText": None, "newText": "hello\n"}])
    diff = next(i["text"] for i in preview(built) if i["label"] == "Diff: new.txt")
    assert diff.startswith("--- /dev/null\n+++ new.txt") and "+hello" in diff


def test_long_texts_are_cut() -> None:
    exact = prompt(raw_input={"command": "x" * 2000})
    assert exact["subject"]["preview_complete"] is True
    long = prompt(raw_input={"command": "x" * 2001})
    command = next(i["text"] for i in preview(long) if i["label"] == "Command")
    assert len(command) == 2000 and command.endswith("…")
    assert long["subject"]["preview_complete"] is False
    assert "⚠ Shortened" in long["formatted_body"] and "\n⚠ Shortened: " in long["body"]
    big_diff = prompt(content=[{"type": "diff", "path": "a", "oldText": "", "newText": "line\n" * 2000}])
    shown = preview(big_diff)[-2]["text"].split("\n")
    assert len(shown) == 80 and shown[-1] == "…"  # at most 80 lines
    assert big_diff["subject"]["preview_complete"] is False
    wide = prompt(content=[{"type": "diff", "path": "a", "oldText": "", "newText": "x" * 5000}])
    assert len(preview(wide)[-2]["text"]) == 4000 and wide["subject"]["preview_complete"] is False
    assert "Diff: a (+2000 −0 lines)" in big_diff["body"]  # the summary counts the whole diff


def test_many_locations_and_diffs_are_cut() -> None:
    five = prompt(locations=[{"path": f"f{i}"} for i in range(5)])
    assert five["subject"]["preview_complete"] is True
    six = prompt(locations=[{"path": f"f{i}"} for i in range(6)])
    assert sum(i["label"] == "Location" for i in preview(six)) == 5
    assert six["subject"]["preview_complete"] is False
    diffs = [{"type": "diff", "path": f"f{i}", "oldText": "a", "newText": "b"} for i in range(6)]
    cut = prompt(content=diffs)
    assert sum(i["label"].startswith("Diff") for i in preview(cut)) == 5
    assert cut["subject"]["preview_complete"] is False


def test_large_prompts_stay_within_budget() -> None:
    diffs = [{"type": "diff", "path": f"f{i}.tsx", "oldText": "", "newText": "<a>😀</a>\n" * 900} for i in range(5)]
    built = prompt(content=diffs, raw_input={"command": "<" * 5000}, title="😀" * 3000)
    assert len(json.dumps(built, ensure_ascii=False).encode()) <= CONTENT_BUDGET
    assert built["subject"]["preview_complete"] is False
    settled = build_settled(
        built,
        state="resolved",
        option_id="allow_once",
        option_name=None,
        answered_by="@alice:hs",
        via="matrix",
        feedback="f" * 10_000,
        decided_at=DECIDED,
    )
    assert len(json.dumps(edit_content("$p", settled), ensure_ascii=False).encode()) < 60_000


def test_optional_fields() -> None:
    built = prompt(tool_kind="", title="")
    assert "tool_kind" not in built
    assert built["title"] == "" and built["body"].startswith("Permission needed: tool call\n")
    named = prompt(tool_kind=None, title="", tool_name="Bash")
    assert named["body"].startswith("Permission needed: Bash\n")
    validate_content(built)
    validate_content(named)


def test_labels() -> None:
    built = prompt(
        options=[
            {"optionId": "a", "name": "L" * 250, "kind": "allow_once"},
            {"optionId": "b", "name": "", "kind": "something_new"},
            {"optionId": "c", "name": "two\nlines", "kind": "reject_once"},
        ]
    )
    assert len(built["options"][0]["label"]) == 200 and built["options"][0]["label"].endswith("…")
    assert built["options"][2] == {"id": "b", "label": "", "meaning": "choose"}  # by meaning: others last
    assert built["dev.agentpod.permission"]["options"][0]["name"] == built["options"][0]["label"]
    assert built["body"].split("\n\n")[1].split("\n") == ["1. " + "L" * 199 + "…", "2. two lines", "3. b"]


def test_expiry_in_utc_milliseconds() -> None:
    plus2 = timezone(timedelta(hours=2))
    assert (
        prompt(expires_at=datetime(2026, 11, 7, 12, 30, 0, 123999, tzinfo=plus2))["subject"]["expires_at"]
        == "2026-11-07T10:30:00.123Z"
    )
    assert prompt(expires_at=datetime(2026, 11, 7, 10, 30))["subject"]["expires_at"] == "2026-11-07T10:30:00.000Z"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"options": []}, "options"),
        ({"options": [{"optionId": f"o{i}", "name": "n", "kind": "x"} for i in range(21)]}, "options"),
        ({"options": [{"optionId": "a", "name": "n"}, {"optionId": "a", "name": "m"}]}, "options[1].optionId"),
        ({"options": [{"optionId": "a" * 201, "name": "n"}]}, "options[0].optionId"),
        ({"options": [{"name": "n"}]}, "options[0].optionId"),
        ({"request_id": ""}, "request_id"),
        ({"session_id": ""}, "session_id"),
        ({"revision": True}, "revision"),
        ({"request_seq": -1}, "request_seq"),
    ],
)
def test_refuses_what_no_valid_event_can_say(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        prompt(**overrides)


def test_pure_and_deterministic() -> None:
    args = {"content": [{"type": "diff", "path": "a", "oldText": "x", "newText": "y"}]}
    assert prompt(**args) == prompt(**args)


# --- settling -------------------------------------------------------------------------------------------


def settle(content: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "state": "resolved",
        "option_id": "allow_once",
        "option_name": "Allow once",
        "answered_by": "@alice:hs",
        "via": "matrix",
        "feedback": None,
        "decided_at": DECIDED,
    }
    kwargs.update(overrides)
    return build_settled(content, **kwargs)


def test_settled_approve() -> None:
    built = prompt()
    settled = settle(built)
    original = built["body"].removesuffix("\n\n" + answer_hint(3))
    asked = original.removesuffix("\n\n1. Allow once\n2. Always allow\n3. Reject\n4. Never allow")
    assert settled["body"] == "✅ Approved (Allow once) by @alice:hs via reply\n\n" + asked  # no choices left
    assert "Reply with" not in settled["body"] and "Reply with" not in settled["formatted_body"]
    assert "<ol>" not in settled["formatted_body"] and "dev.agentpod.permission" not in settled  # no v1 card
    assert settled["formatted_body"].startswith(
        "<p><strong>✅ Approved (Allow once) by @alice:hs via reply</strong></p>"
    )
    assert "<pre><code>bun test</code></pre>" in settled["formatted_body"]
    assert settled["resolution"] == {
        "state": "resolved",
        "option_id": "allow_once",
        "option_label": "Allow once",
        "answered_by": "@alice:hs",
        "via": "matrix",
        "feedback": None,
        "decided_at": "2026-11-07T10:02:03.456Z",
    }
    for key, value in built.items():
        if key not in ("body", "formatted_body", "dev.agentpod.permission"):
            assert settled[key] == value
    validate_content(settled)
    assert schema_verdict(settled) is None
    assert built == prompt()  # the prompt passed in is not changed


@pytest.mark.parametrize(
    ("overrides", "first_line"),
    [
        (
            {"option_id": "reject_always", "option_name": None, "feedback": "use  the\nstaging db"},
            "❌ Rejected (Never allow) by @alice:hs via reply: “use the staging db”",
        ),
        ({"via": "reaction"}, "✅ Approved (Allow once) by @alice:hs via reaction"),
        ({"via": "api", "answered_by": "api"}, "✅ Approved (Allow once) via API"),
        (
            {
                "state": "expired",
                "option_id": "reject_once",
                "option_name": "Reject",
                "answered_by": "timeout",
                "via": "timeout",
            },
            "⏱ Expired, no answer in time: rejected (Reject)",
        ),
        (
            {"state": "expired", "option_id": None, "option_name": None, "answered_by": "timeout", "via": "timeout"},
            "⏱ Expired, no answer in time: cancelled",
        ),
        (
            {"state": "cancelled", "option_id": None, "option_name": None, "answered_by": "cancel", "via": "cancel"},
            "🚫 Cancelled",
        ),
        (
            {"state": "cancelled", "option_id": None, "option_name": None, "via": "api"},
            "🚫 Cancelled by @alice:hs via API",
        ),
    ],
)
def test_settled_outcomes(overrides: dict[str, Any], first_line: str) -> None:
    settled = settle(prompt(), **overrides)
    assert settled["body"].split("\n")[0] == first_line
    assert settled["body"].split("\n")[1] == ""
    validate_content(settled)


def test_settled_choose() -> None:
    built = prompt(options=[{"optionId": "edit", "name": "Let me edit", "kind": "other"}])
    settled = settle(built, option_id="edit", option_name=None)
    assert settled["body"].startswith("☑️ Chose (Let me edit) by @alice:hs via reply\n\nPermission needed:")
    assert settled["resolution"]["option_label"] == "Let me edit"


def test_edit_content() -> None:
    settled = settle(prompt())
    edit = edit_content("$prompt:hs", settled)
    assert edit["m.relates_to"] == {"rel_type": "m.replace", "event_id": "$prompt:hs"}
    assert edit["m.new_content"] == settled
    assert edit["body"] == "* ✅ Approved (Allow once) by @alice:hs via reply"  # the outcome line: a lean fallback
    assert "formatted_body" not in edit and edit["msgtype"] == "m.text"
    size = len(json.dumps(edit, ensure_ascii=False).encode())
    assert size < len(json.dumps(prompt(), ensure_ascii=False).encode()), "the edit weighs more than the prompt"
    assert "suite_event_type" not in edit  # the fallback is not a second prompt
    assert "m.relates_to" not in edit["m.new_content"]


# --- hypothesis: whatever comes in, a valid event goes out ----------------------------------------------

raw_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
any_text = st.text(max_size=300) | st.text(st.characters(codec="utf-8"), max_size=50) | st.just("\ud800 lone")
acp_options = st.lists(
    st.fixed_dictionaries(
        {"optionId": st.text(min_size=1, max_size=200).filter(lambda s: "\ud800" not in s)},
        optional={
            "name": any_text | raw_json,
            "kind": st.sampled_from(["allow_once", "allow_always", "reject_once", "reject_always", "other"]) | raw_json,
        },
    ),
    min_size=1,
    max_size=20,
    unique_by=lambda o: o["optionId"],
)
raw_inputs = raw_json | st.fixed_dictionaries(
    {"command": any_text | st.lists(any_text, max_size=4)}, optional={"args": st.lists(raw_json, max_size=3)}
)
locations = st.lists(
    st.fixed_dictionaries({"path": any_text}, optional={"line": st.integers() | raw_json}) | raw_json, max_size=7
)
contents = st.lists(
    st.fixed_dictionaries(
        {"type": st.just("diff"), "path": any_text, "newText": any_text},
        optional={"oldText": any_text | st.none()},
    )
    | st.fixed_dictionaries(
        {"type": st.just("content"), "content": st.fixed_dictionaries({"type": st.just("text"), "text": any_text})}
    )
    | raw_json,
    max_size=7,
)


@settings(max_examples=120, deadline=None)
@given(
    title=any_text,
    tool_kind=st.none() | any_text,
    tool_name=st.none() | any_text,
    options=acp_options,
    raw_input=raw_inputs,
    locs=locations,
    content=contents,
    seq=st.integers(0, 2**40),
    revision=st.integers(-5, 2**40),
    expires=st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2999, 1, 1)),
)
def test_random_inputs_build_valid_content(
    title: str,
    tool_kind: str | None,
    tool_name: str | None,
    options: list[dict[str, Any]],
    raw_input: Any,
    locs: list[Any],
    content: list[Any],
    seq: int,
    revision: int,
    expires: datetime,
) -> None:
    built = prompt(
        title=title,
        tool_kind=tool_kind,
        tool_name=tool_name,
        options=options,
        raw_input=raw_input,
        locations=locs,
        content=content,
        request_seq=seq,
        revision=revision,
        expires_at=expires,
    )
    validate_content(built)
    assert schema_verdict(built) is None
    lines = built["body"].split("\n")
    assert lines[0].startswith("Permission needed: ")
    assert lines[-len(options) - 3 :][0] == "" and lines[-2] == "" and lines[-1].startswith("Reply with the number")
    for n, line in enumerate(lines[-len(options) - 2 : -2], 1):
        assert line.startswith(f"{n}. ") and line.strip() != f"{n}."
    assert [o["id"] for o in built["options"]] == [o["optionId"] for o in by_meaning(options)]
    assert len(json.dumps(built, ensure_ascii=False).encode()) <= CONTENT_BUDGET
    settled = settle(built, option_id=options[0]["optionId"], option_name=None, feedback=title)
    validate_content(settled)
    assert settled["body"].count("\n") >= 2 and "\n" not in settled["body"].split("\n\n")[0]


def test_absurd_sizes_everywhere_stay_within_budget() -> None:
    huge = "p" * 100_000
    built = prompt(
        tool_kind=huge,
        tool_name=huge,
        title=huge,
        locations=[{"path": huge}] * 3,
        content=[{"type": "diff", "path": huge, "oldText": huge, "newText": huge + "q"}],
        options=[{"optionId": f"o{i}", "name": huge, "kind": "allow_once"} for i in range(20)],
    )
    assert len(json.dumps(built, ensure_ascii=False).encode()) <= CONTENT_BUDGET
    assert built["subject"]["preview_complete"] is False
    validate_content(built)


def test_label_names_the_agent_in_the_preview() -> None:
    from datetime import UTC, datetime

    from bot.events import validate_content
    from bot.prompts import build_prompt

    c = build_prompt(
        request_id="s:1", session_id="s", request_seq=1, title="Run ls", tool_kind="execute",
        options=[{"optionId": "ok", "name": "Allow once", "kind": "allow_once"}], raw_input={"command": "ls"},
        locations=[], content=[], digest="d", revision=1, expires_at=datetime(2030, 1, 1, tzinfo=UTC),
        label="claude-laptop <b>",
    )
    validate_content(c)
    assert c["subject"]["preview"][0] == {"type": "field", "label": "Agent", "value": "claude-laptop <b>"}
    assert "claude-laptop &lt;b&gt;" in c["formatted_body"]


def test_several_details_are_shown_under_one_label() -> None:
    """A hook's PermissionRequest carries the agent's description and the session line: one "Details:"."""
    texts = ["The agent says: Create a marker file", "“Allow for this session” allows: Bash(touch M1)"]
    built = prompt(content=[{"type": "content", "content": {"type": "text", "text": t}} for t in texts])
    assert built["body"].count("Details:") == 1 and built["formatted_body"].count("<b>Details</b>") == 1
    for t in texts:
        assert f"│ {t}" in built["body"]
    assert [i["label"] for i in preview(built)].count("Details") == 2  # the v2 preview keeps each item
