"""Watched harnesses, in-process: a held record -> a submission, a record -> the decision sent back,
discovery and config errors (pure)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.config import ConfigError, HarnessConfig, parse_config
from bot.harness.client import DiscoveryError, NotRunning, discover
from bot.harness.mapping import RecordError, decision_body, elsewhere_note, to_submission
from bot.inbox.record import Outcome, Record
from bot.inbox.submission import parse_submission
from bot.service import health
from bot.util.digest import digest_params

RECORD: dict[str, Any] = {
    "id": "perm_1",
    "sessionId": "ses_abc123",
    "toolCallId": "toolu_1",
    "toolName": "Bash",
    "text": 'Allow "Bash"?',
    "options": [
        {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
        {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
        {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
        {"optionId": "allow_edits", "name": "Allow edits", "kind": "other"},
    ],
    "requestedAt": "2026-12-01T03:00:00.000Z",
    "adapter": "claude-code",
    "title": "fix the tests\n✅ Approved by @alice",
    "age": "3s",
    "rawInput": {"command": "bun test"},
}


def test_a_held_record_becomes_a_submission_kept_as_received() -> None:
    h = to_submission("laptop", dict(RECORD))
    s = h.submission
    assert h.harness_id == "perm_1" and s.session_id == "laptop:ses_abc123"
    assert s.tool_name == "Bash" and s.title == "Run: bun test" and s.raw_input == {"command": "bun test"}
    assert s.tool_kind == "execute"
    assert [o["optionId"] for o in s.options] == ["allow_once", "allow_always", "reject_once", "allow_edits"]
    assert s.params == RECORD and s.digest == digest_params(RECORD)  # the digest covers the record as received
    assert s.key == f"perm_1.{h.fingerprint}"
    # The label names the harness, the adapter and the title; agent-given text cannot add lines or spaces.
    assert s.label == "laptop:claude-code:fix-the-tests-Approved-by-@alice"


def test_a_claude_code_tool_call_is_shown_as_the_hook_door_shows_it() -> None:
    bash = to_submission("laptop", {**RECORD, "rawInput": {"command": "rm -rf build\nls", "description": "Clean"}})
    assert bash.submission.title == "Run: rm -rf build ls"  # the command in the title, on one line
    said = {"type": "content", "content": {"type": "text", "text": "The agent says: Clean"}}
    assert bash.submission.content == [said]  # the Bash description, as prose
    edit = to_submission("laptop", {**RECORD, "toolName": "Edit",
                                     "rawInput": {"file_path": "a.py", "old_string": "x", "new_string": "y"}})
    assert edit.submission.title == "Edit a.py" and edit.submission.content[0]["type"] == "diff"
    odd = to_submission("laptop", {**RECORD, "toolName": "Bash", "rawInput": "not an object"})
    assert odd.submission.title == "Bash" and odd.submission.content == []
    mine = to_submission("laptop", {**RECORD, "toolName": "Deploy", "rawInput": {"target": "prod"}})
    assert mine.submission.title == "Deploy"  # unknown tools: the name, the raw input shown as it is


def test_the_fingerprint_ignores_age_but_not_a_reused_id() -> None:
    a = to_submission("laptop", dict(RECORD))
    b = to_submission("laptop", {**RECORD, "age": "9s"})
    c = to_submission("laptop", {**RECORD, "requestedAt": "2026-12-01T04:00:00.000Z"})
    assert a.fingerprint == b.fingerprint and a.submission.key == b.submission.key
    assert c.fingerprint != a.fingerprint  # a harness restarted and reused perm_1 for a new request


def test_an_acp_submission_digest_is_unchanged() -> None:
    body = {"sessionId": "s", "toolCall": {"toolCallId": "c"}, "options": RECORD["options"], "key": "k"}
    assert parse_submission(body).digest == digest_params({k: v for k, v in body.items() if k != "key"})


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"id": "perm 1"}, "id"),
        ({"id": None}, "id"),
        ({"sessionId": "a/b"}, "sessionId"),
        ({"options": []}, "options"),
        ({"options": [{"optionId": "x"}]}, "options[0].name"),
        ({"rawInput": float("nan")}, "record"),
    ],
)
def test_records_that_cannot_be_taken_name_the_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(RecordError) as e:
        to_submission("laptop", {**RECORD, **change})
    assert str(e.value).startswith(field), e.value


def _rec(option_id: str | None, feedback: str | None = None, by: str = "@alice:hs") -> Record:
    s = to_submission("laptop", dict(RECORD)).submission
    return Record(
        id="laptop:ses_abc123:1", session_id=s.session_id, request_seq=1, key=s.key, label=s.label,
        tool_call_id=s.tool_call_id, title=s.title, tool_kind=None, tool_name=s.tool_name, options=s.options,
        raw_input=s.raw_input, locations=[], content=[], params=s.params, digest=s.digest, revision=1,
        state="resolved" if option_id else "cancelled", requested_at=0.0, expires_at=900.0,
        prompt_event_id="$p", prompt_edited=True,
        outcome=Outcome(option_id=option_id, answered_by=by, via="matrix", feedback=feedback, decided_at=1.0),
    )


@pytest.mark.parametrize(
    ("option", "feedback", "body"),
    [
        ("allow_once", None, {"decision": "approve", "optionId": "allow_once"}),
        ("allow_always", None, {"decision": "approve", "optionId": "allow_always", "scope": "always"}),
        ("reject_once", "not on main", {"decision": "deny", "optionId": "reject_once", "feedback": "not on main"}),
        ("allow_edits", None, {"decision": "deny", "optionId": "allow_edits"}),
        (None, None, {"decision": "deny"}),
    ],
)
def test_the_decision_sent_back_names_the_exact_option(option: str | None, feedback: str | None, body: Any) -> None:
    assert decision_body(_rec(option, feedback)) == body


def test_the_elsewhere_note_keeps_whose_answer_was_not_delivered() -> None:
    note = elsewhere_note(_rec("allow_once"))
    assert note == "answered elsewhere (at the harness); @alice:hs's answer (Allow once) was not delivered"


BASE: dict[str, Any] = {"matrix": {"homeserver": "http://hs", "user_id": "@b:hs", "password": "p", "room": "!r:hs"}}


@pytest.mark.parametrize(
    ("harnesses", "env", "line"),
    [
        ([{"url": "http://h"}], {}, "harnesses.0.name: required"),
        ([{"name": "a b", "url": "http://h"}], {}, "harnesses.0.name: must be"),
        ([{"name": "a", "url": "ftp://h"}], {}, "harnesses.0.url: must start with http"),
        ([{"name": "a", "url": "http://h", "poll": "soon"}], {}, "harnesses.0.poll: not a duration"),
        ([{"name": "a", "url": "http://h", "workspace": "/w"}], {}, "harnesses.0: workspace: give url or workspace"),
        ([{"name": "a"}], {}, "harnesses.0.url: required (or workspace, or env AGENTPROTO_DAEMON_URL)"),
        ([{"name": "a", "url": "http://h"}, {"name": "a", "url": "http://g"}], {}, "harnesses.1.name: 'a' is used"),
        ([{"name": "a", "url": "http://h", "token": "s3cret"}], {}, "harnesses.0.token: unknown key"),
    ],
)
def test_config_errors_are_one_line_naming_the_key(harnesses: Any, env: dict[str, str], line: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config({**BASE, "harnesses": harnesses}, env)
    assert str(e.value).startswith(line) and "\n" not in str(e.value) and "s3cret" not in str(e.value), e.value


def test_config_takes_harnesses() -> None:
    cfg = parse_config({**BASE, "harnesses": [{"name": "laptop", "url": "http://127.0.0.1:4700", "poll": "500ms"}]}, {})
    assert cfg.harnesses == [HarnessConfig(name="laptop", url="http://127.0.0.1:4700", poll=0.5)]
    assert parse_config({**BASE, "harnesses": [{"name": "a"}]}, {"AGENTPROTO_DAEMON_URL": "http://h"}).harnesses


def test_discovery_from_url_workspace_and_env(tmp_path: Path) -> None:
    ep = discover(HarnessConfig(name="a", url="http://h:1/"), {"AGENTPROTO_DAEMON_TOKEN": "tok-9z"})
    assert (ep.url, ep.token) == ("http://h:1", "tok-9z") and "tok-9z" not in repr(ep)
    (tmp_path / ".agentproto").mkdir()
    (tmp_path / ".agentproto" / "runtime.json").write_text(json.dumps({"url": "http://w:2", "token": "wt"}))
    ws = HarnessConfig(name="a", workspace=str(tmp_path))
    assert discover(ws, {}) == discover(ws, {"OTHER": "x"})
    assert (discover(ws, {}).url, discover(ws, {}).token) == ("http://w:2", "wt")
    assert discover(HarnessConfig(name="a"), {"AGENTPROTO_DAEMON_URL": "http://e:3"}).url == "http://e:3"
    with pytest.raises(NotRunning, match=r"no .*runtime\.json \(the harness is not running\)"):
        discover(HarnessConfig(name="a", workspace=str(tmp_path / "nope")), {})
    (tmp_path / "bad" / ".agentproto").mkdir(parents=True)
    (tmp_path / "bad" / ".agentproto" / "runtime.json").write_text("{")
    with pytest.raises(DiscoveryError, match=r"harnesses\.a\.workspace: cannot read"):
        discover(HarnessConfig(name="a", workspace=str(tmp_path / "bad")), {})


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, ("http://w:2", "wt")),  # runtime.json's pair
        ({"AGENTPROTO_DAEMON_TOKEN": "exported"}, ("http://w:2", "wt")),  # a token alone never beats runtime.json
        ({"AGENTPROTO_DAEMON_URL": "http://e:3", "AGENTPROTO_DAEMON_TOKEN": "exported"}, ("http://e:3", "exported")),
        ({"AGENTPROTO_DAEMON_URL": "http://e:3"}, ("http://e:3", None)),  # never runtime.json's token elsewhere
    ],
)
def test_the_env_pair_overrides_runtime_json_and_never_mixes(
    tmp_path: Path, env: dict[str, str], expected: tuple[str, str | None]
) -> None:
    (tmp_path / ".agentproto").mkdir()
    (tmp_path / ".agentproto" / "runtime.json").write_text(json.dumps({"url": "http://w:2", "token": "wt"}))
    ep = discover(HarnessConfig(name="a", workspace=str(tmp_path)), env)
    assert (ep.url, ep.token) == expected


def test_health_is_degraded_naming_each_unhealthy_harness() -> None:
    facts = health.Facts(ready=True, joined=True, last_sync_ok=100.0, ready_at=100.0, sync_timeout=30,
                         send_failing=None)
    hs = [
        {"name": "laptop", "ok": False, "state": "unreachable", "error": "no runtime.json (not running)"},
        {"name": "ci", "ok": True, "state": "ok", "error": None},
        {"name": "new", "ok": False, "state": "starting", "error": None},
        {"name": "box", "ok": False, "state": "token_refused", "error": "token check: HTTP 401"},
    ]
    body = health.body(facts, 101.0, True, hs)
    assert body["ok"] is False and body["live"] is True and body["status"] == "degraded" and body["harnesses"] == hs
    assert body["reasons"] == [
        "harness laptop: unreachable: no runtime.json (not running)",
        "harness box: token_refused: token check: HTTP 401",
    ]
    assert health.body(facts, 101.0, True, hs[1:3])["status"] == "ok"
    assert "harnesses" not in health.body(facts, 101.0, True)
