"""The hook translation and outputs, over the captured fixtures (tests/fixtures/hooks/); no daemon."""

from __future__ import annotations

import io
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from bot.hooks.command import HookArgs, prepare, read_input, run
from bot.hooks.models import Cli, HookInput, HookInputError, parse_hook_input
from bot.hooks.output import decision
from bot.hooks.snippet import snippet
from bot.hooks.translate import ALLOW_ONCE, ALLOW_SESSION, DENY, build_submission
from bot.inbox.submission import parse_submission
from bot.prompts import build_prompt

FIX = Path(__file__).parent / "fixtures" / "hooks"
SID = "0b1c2d3e-0000-4000-8000-000000000001"


def load(name: str, cwd: str = "/work/proj") -> dict[str, Any]:
    text = (FIX / f"{name}.json").read_text()
    data: dict[str, Any] = json.loads(text.replace("<cwd>", cwd).replace("<scenario>", "/tmp/scn"))
    data = data.get("body", data)
    data["session_id"] = SID
    return data


def inp(name: str, cli: Cli = "claude-code", **tool_input: Any) -> HookInput:
    data = load(name)
    data["tool_input"].update(tool_input)
    return parse_hook_input(cli, data)


def sub(cli: Cli, i: HookInput) -> dict[str, Any]:
    body = build_submission(cli, i, key="hook-test")
    parse_submission(body)  # the daemon takes it
    return body


def rendered(body: dict[str, Any]) -> str:
    s = parse_submission(body)
    c = build_prompt(
        request_id=f"{SID}:1",
        session_id=SID,
        request_seq=1,
        title=s.title,
        tool_kind=s.tool_kind,
        options=s.options,
        raw_input=s.raw_input,
        locations=s.locations,
        content=s.content,
        digest=s.digest,
        revision=1,
        expires_at=datetime(2026, 12, 1),
        tool_name=s.tool_name,
        label=s.label,
        cwd=s.cwd,
    )
    return str(c["body"]) + "\n" + json.dumps(c["subject"]["preview"], ensure_ascii=False)


FIXTURES = sorted(p.stem for p in FIX.glob("*.json"))


@pytest.mark.parametrize("name", FIXTURES)
def test_every_fixture_becomes_a_valid_prompt(name: str) -> None:
    cli: Cli = "codex" if name.startswith("codex") else "claude-code"
    data = load(name)
    if cli == "codex" and data["hook_event_name"] == "PreToolUse":
        with pytest.raises(HookInputError, match="not handled for codex"):
            parse_hook_input(cli, data)
        return
    i = parse_hook_input(cli, data)
    text = rendered(sub(cli, i))
    assert "Permission needed" in text and cli in text
    assert "/work/proj" in text  # the working directory is shown


def test_bash_shows_command_description_and_session_rule() -> None:
    body = sub("claude-code", inp("claude-code-PermissionRequest-Bash"))
    tc = body["toolCall"]
    assert tc["title"] == "Run: touch /work/proj/M1" and tc["kind"] == "execute"
    assert tc["rawInput"]["command"] == "touch /work/proj/M1"
    assert [o["optionId"] for o in body["options"]] == [ALLOW_ONCE, ALLOW_SESSION, DENY]
    assert body["label"] == "claude-code" and body["sessionId"] == SID
    text = rendered(body)
    assert "Create a marker file" in text and "Bash(touch /work/proj/M1)" in text


def test_edit_is_a_unified_diff_of_old_and_new() -> None:
    body = sub("claude-code", inp("claude-code-PermissionRequest-Edit"))
    assert body["toolCall"]["kind"] == "edit"
    text = rendered(body)
    assert "-alpha" in text and "+gamma" in text and "/work/proj/existing.txt" in text
    # Allow for this session = setMode acceptEdits, as the suggestion offered
    assert ALLOW_SESSION in [o["optionId"] for o in body["options"]]


def test_multiedit_shows_each_change() -> None:
    data = load("claude-code-PermissionRequest-Edit")
    data["tool_name"] = "MultiEdit"
    data["tool_input"] = {
        "file_path": "/work/proj/a.py",
        "edits": [{"old_string": "x = 1", "new_string": "x = 2"}, {"old_string": "y", "new_string": "z"}],
    }
    text = rendered(sub("claude-code", parse_hook_input("claude-code", data)))
    assert "-x = 1" in text and "+x = 2" in text and "+z" in text and "2 changes" in text


def test_write_diffs_against_the_file_on_disk(tmp_path: Path) -> None:
    (tmp_path / "new.txt").write_text("old line\n")
    raw = json.dumps(load("claude-code-PermissionRequest-Write", cwd=str(tmp_path))).encode()
    _, body = prepare("claude-code", raw)
    text = rendered(sub("claude-code", parse_hook_input("claude-code", body)))
    assert "-old line" in text and "+hello" in text
    (tmp_path / "new.txt").unlink()
    _, body = prepare("claude-code", raw)
    text = rendered(sub("claude-code", parse_hook_input("claude-code", body)))
    assert "/dev/null" in text and "+hello" in text and "not read" not in text


def test_write_without_disk_says_so() -> None:
    text = rendered(sub("claude-code", inp("claude-code-PermissionRequest-Write")))
    assert "not read" in text and "+hello" in text


def test_webfetch_shows_url_and_session_rule_is_the_domain() -> None:
    body = sub("claude-code", inp("claude-code-PermissionRequest-WebFetch", url="https://example.org/a?b=1"))
    assert body["toolCall"]["kind"] == "fetch"
    assert "https://example.org/a?b=1" in rendered(body)
    out = decision(
        "claude-code",
        inp("claude-code-PermissionRequest-WebFetch", url="https://example.org/a"),
        settled(body, ALLOW_SESSION),
    )
    assert out is not None
    rules = out["hookSpecificOutput"]["decision"]["updatedPermissions"]
    assert rules == [
        {
            "type": "addRules",
            "rules": [{"toolName": "WebFetch", "ruleContent": "domain:example.org"}],
            "behavior": "allow",
            "destination": "session",
        }
    ]


def test_mcp_tool_shows_server_tool_and_input() -> None:
    data = load("claude-code-PermissionRequest-Bash")
    data["tool_name"] = "mcp__github__create_issue"
    data["tool_input"] = {"repo": "o/r", "title": "hi"}
    body = sub("claude-code", parse_hook_input("claude-code", data))
    text = rendered(body)
    assert "MCP server: github" in text and "MCP tool: create_issue" in text and "repo" in text and "o/r" in text


def settled(
    body: dict[str, Any], option: str | None, state: str = "resolved", feedback: str | None = None
) -> dict[str, Any]:
    return {
        "state": state,
        "options": body["options"],
        "outcome": {"option_id": option, "answered_by": "@alice:hs", "feedback": feedback},
    }


def test_permission_request_outputs() -> None:
    i = inp("claude-code-PermissionRequest-Bash")
    body = sub("claude-code", i)
    once = decision("claude-code", i, settled(body, ALLOW_ONCE))
    assert once == {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}
    session = decision("claude-code", i, settled(body, ALLOW_SESSION))
    assert session is not None
    d = session["hookSpecificOutput"]["decision"]
    assert d["updatedPermissions"][0]["rules"] == [{"toolName": "Bash", "ruleContent": "touch /work/proj/M1"}]
    assert d["updatedPermissions"][0]["destination"] == "session"
    denied = decision("claude-code", i, settled(body, DENY, feedback="not on main"))
    assert denied is not None and denied["hookSpecificOutput"]["decision"] == {
        "behavior": "deny",
        "message": "not on main",
    }
    assert decision("claude-code", i, settled(body, None, state="cancelled")) is None
    expired = decision("claude-code", i, settled(body, DENY, state="expired"))
    assert expired is not None and "no answer in time" in expired["hookSpecificOutput"]["decision"]["message"]


def test_sdkhost_suggestion_is_not_persisted() -> None:
    i = inp("claude-code-PermissionRequest-Bash-sdkhost")
    out = decision("claude-code", i, settled(sub("claude-code", i), ALLOW_SESSION))
    assert out is not None
    for entry in out["hookSpecificOutput"]["decision"]["updatedPermissions"]:
        assert entry["destination"] == "session"  # never localSettings


def test_pre_tool_use_outputs_and_no_session_option() -> None:
    i = inp("claude-code-PreToolUse-Bash")
    body = sub("claude-code", i)
    assert body["toolCall"]["toolCallId"] == "toolu_mock0001"
    assert [o["optionId"] for o in body["options"]] == [ALLOW_ONCE, DENY]
    out = decision("claude-code", i, settled(body, ALLOW_ONCE))
    assert out is not None and out["hookSpecificOutput"]["permissionDecision"] == "allow"
    out = decision("claude-code", i, settled(body, DENY, feedback="no"))
    assert out == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "no",
        }
    }


def test_codex_never_gets_updated_permissions() -> None:
    i = inp("codex-PermissionRequest-Bash", cli="codex")
    body = sub("codex", i)
    assert body["label"] == "codex" and ALLOW_SESSION not in [o["optionId"] for o in body["options"]]
    forged = settled(body, ALLOW_SESSION)  # even a record naming the session option
    forged["options"] = [*body["options"], {"optionId": ALLOW_SESSION, "kind": "allow_always"}]
    out = decision("codex", i, forged)
    assert out == {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}


def test_same_input_same_tool_call_id() -> None:
    a = sub("claude-code", inp("claude-code-PermissionRequest-Bash"))["toolCall"]["toolCallId"]
    b = sub("claude-code", inp("claude-code-PermissionRequest-Bash"))["toolCall"]["toolCallId"]
    c = sub("claude-code", inp("claude-code-PermissionRequest-Bash", command="ls"))["toolCall"]["toolCallId"]
    assert a == b != c and a.startswith("hook-")


@pytest.mark.parametrize(
    ("mutate", "why"),
    [
        (lambda d: d.update(hook_event_name="Stop"), "hook_event_name"),
        (lambda d: d.pop("tool_input"), "tool_input"),
        (lambda d: d.update(tool_input="rm -rf /"), "tool_input"),
        (lambda d: d.update(session_id="../../etc"), "session_id"),
        (lambda d: d.update(session_id=""), "session_id"),
        (lambda d: d.update(tool_name=""), "tool_name"),
        (lambda d: d.update(tool_name=["Bash"]), "tool_name"),
        (lambda d: d.update(permission_suggestions="all"), "permission_suggestions"),
    ],
)
def test_malformed_input_is_refused_naming_the_field(mutate: Any, why: str) -> None:
    data = load("claude-code-PermissionRequest-Bash")
    mutate(data)
    with pytest.raises(HookInputError, match=why):
        parse_hook_input("claude-code", data)


def test_hostile_command_cannot_forge_lines() -> None:
    cmd = "ls\n\n1. Allow once\n@room Permission needed: nothing"
    body = sub("claude-code", inp("claude-code-PermissionRequest-Bash", command=cmd, description="harmless\n2. x"))
    assert "\n" not in body["toolCall"]["title"]
    lines = rendered(body).split("\n")
    assert sum(1 for ln in lines if ln.startswith("1. ")) == 1


def test_forged_extras_do_not_reach_the_daemon_from_stdin(tmp_path: Path) -> None:
    data = load("claude-code-PermissionRequest-Bash")
    data["_permission_bot"] = {"write_before": "fake", "write_before_known": True}
    _, body = prepare("claude-code", json.dumps(data).encode())
    assert "_permission_bot" not in body


def hook(raw: bytes, fallback: str = "ask", cli: Cli = "claude-code") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    args = HookArgs(cli=cli, url="http://127.0.0.1:9", fallback=fallback, connect_timeout=0.3)  # type: ignore[arg-type]
    code = run(args, raw, out, err)
    return code, out.getvalue(), err.getvalue()


BASH = json.dumps(load("claude-code-PermissionRequest-Bash")).encode()


@pytest.mark.parametrize(
    ("raw", "fallback", "code", "behavior"),
    [
        (BASH, "ask", 0, None),
        (BASH, "deny", 0, "deny"),
        (b"not json", "ask", 0, None),
        (b"not json", "deny", 2, None),
        (b'{"hook_event_name":"Stop"}', "ask", 0, None),
        (b'{"hook_event_name":"PermissionRequest"}', "deny", 0, "deny"),
        (b"[" * 100_000, "ask", 0, None),
        (b"x" * 1_000_001, "deny", 2, None),
    ],
)
def test_fail_safe_never_allows(raw: bytes, fallback: str, code: int, behavior: str | None) -> None:
    got_code, out, err = hook(raw, fallback)
    assert got_code == code
    assert len(err.strip().splitlines()) == 1 and err.startswith("permission-bot hook: ")
    if behavior is None and fallback == "ask":  # no decision; Claude Code is shown why (systemMessage)
        assert set(json.loads(out)) == {"systemMessage"} and err.strip().split("; ")[0] in out
    elif behavior is None:
        assert out == ""
    else:
        assert json.loads(out)["hookSpecificOutput"]["decision"]["behavior"] == behavior
    assert "allow" not in out


def test_print_config() -> None:
    ask = snippet("claude-code", prompt_timeout=600, token_file="/home/a b/agent-token")
    h = ask["hooks"]["PermissionRequest"][0]["hooks"][0]
    command = "permission-bot hook claude-code --token-file '/home/a b/agent-token'"
    assert h == {"type": "command", "command": command, "timeout": 660}
    deny = snippet("codex", prompt_timeout=900, token_file="/t", fallback="deny")["hooks"]["PermissionRequest"][0]
    deny = deny["hooks"][0]
    assert deny["onFailure"] == "block" and deny["command"].endswith("--fallback deny") and deny["timeout"] > 900
    http = snippet("claude-code", prompt_timeout=60, token_file="/t", http_url="http://127.0.0.1:8750")
    h = http["hooks"]["PermissionRequest"][0]["hooks"][0]
    assert h["url"] == "http://127.0.0.1:8750/hooks/claude-code" and "onFailure" not in h
    assert h["headers"]["Authorization"] == "Bearer $PERMISSION_BOT_TOKEN"
    assert h["allowedEnvVars"] == ["PERMISSION_BOT_TOKEN"]


@pytest.mark.parametrize(
    ("tool", "tool_input", "title", "kind"),
    [
        ("NetworkAccess", {"command": "curl https://x.org"}, "Network access for: curl https://x.org", "fetch"),
        ("WebSearch", {"query": "acp spec"}, "Search the web for acp spec", "fetch"),
        ("Read", {"file_path": "/etc/hosts"}, "Read: /etc/hosts", "read"),
        ("Grep", {"pattern": "TODO"}, "Grep: TODO", "search"),
        ("NotebookEdit", {"notebook_path": "/w/n.ipynb", "new_source": "x"}, "NotebookEdit: /w/n.ipynb", "edit"),
        ("SomethingNew", {}, "SomethingNew", "other"),
        ("Evil\n1. Allow once", {}, "Evil 1. Allow once", "other"),
    ],
)
def test_other_tools_get_a_title_and_kind(tool: str, tool_input: dict[str, Any], title: str, kind: str) -> None:
    data = load("claude-code-PermissionRequest-Bash")
    data["tool_name"], data["tool_input"] = tool, tool_input
    tc = sub("claude-code", parse_hook_input("claude-code", data))["toolCall"]
    assert (tc["title"], tc["kind"]) == (title, kind)
    assert tc["_meta"]["claude-code"]["cwd"] == "/work/proj"


@pytest.mark.parametrize("command", ["git:*", "ls *", "rm -rf build/*"])
def test_wildcard_command_gets_no_session_rule(command: str) -> None:
    """Attack: a command that, as a session rule, would be a wildcard allowing more than was shown."""
    i = inp("claude-code-PermissionRequest-Bash", command=command)
    body = sub("claude-code", i)
    assert ALLOW_SESSION not in [o["optionId"] for o in body["options"]]
    forged = settled(body, ALLOW_SESSION)  # even if the record said so, no rule goes out
    forged["options"] = [*body["options"], {"optionId": ALLOW_SESSION, "kind": "allow_always"}]
    out = decision("claude-code", i, forged)
    assert out is not None and "updatedPermissions" not in out["hookSpecificOutput"]["decision"]


def test_read_input_stops_at_a_whole_value_even_if_stdin_stays_open() -> None:
    import os

    r, w = os.pipe()
    os.write(w, b'{"a": [1, 2], "b": "\xc3\xa9')
    os.write(w, b'"}\n')  # the writer keeps the pipe open
    assert json.loads(read_input(r)) == {"a": [1, 2], "b": "é"}
    os.write(w, b"not json")
    os.close(w)
    assert read_input(r) == b"not json"
    os.close(r)
