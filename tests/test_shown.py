"""INVARIANT 2, the pure parts: what of ``rawInput`` is shown (:mod:`bot.prompts.shown`); that the prompt
shows it in the body, the HTML and ``subject.preview`` or says it is incomplete (a property test); that
rules match exactly what was shown."""

from __future__ import annotations

import html
import json
import re
import shlex
from datetime import datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.cli.permissions.render import question, table, tool_of
from bot.hooks.models import HookInput
from bot.hooks.translate import build_submission, session_rule, url_host
from bot.inbox.rules import decide, parse_rules
from bot.inbox.rules.model import shown_of
from bot.inbox.session_rules import scope_of
from bot.prompts import build_prompt
from bot.prompts.shown import PROSE, as_json, shown_input
from bot.prompts.text import blanks, code_text, defang

OPTIONS = [
    {"optionId": "a", "name": "Allow", "kind": "allow_once"},
    {"optionId": "r", "name": "No", "kind": "reject_once"},
]


def prompt(raw_input: Any, *, cwd: str | None = "/tmp", kind: str | None = "execute", **kw: Any) -> dict[str, Any]:
    return build_prompt(
        request_id="s:1", session_id="s", request_seq=1, title=kw.get("title", "Run it"), tool_kind=kind,
        options=OPTIONS, raw_input=raw_input, locations=[], content=kw.get("content", []), digest="d", revision=1,
        expires_at=datetime(2030, 1, 1), cwd=cwd, tool_name="Bash",
    )


# ---------------------------------------------------------------- what is shown


def test_the_command_line_is_command_and_args_in_any_shape() -> None:
    assert shown_input({"command": "git", "args": "push --force"}).command == "git push --force"
    assert shown_input({"command": "rm", "args": ["-rf", "/ x"]}).command == "rm -rf '/ x'"
    assert shown_input({"command": ["make", "-f", "a b"], "args": [1, True]}).command == "make -f 'a b' 1 true"
    assert shown_input({"command": "ls", "args": {"all": True}}).command == 'ls \'{"all":true}\''
    assert shown_input({"command": "ls", "args": []}).command == "ls"
    assert shown_input({"command": "", "args": ["rm", "-rf", "/"]}).label == "Input"  # no command: all as JSON


def test_cwd_env_flags_and_unknown_fields_are_settings_and_prose_is_not() -> None:
    s = shown_input({"command": "rm -rf *", "cwd": "/home/alice", "env": {"LD_PRELOAD": "/x.so"}, "timeout": 5,
                     "dangerouslyDisableSandbox": True, "with_escalated_permissions": False, "description": "tidy",
                     "we ird": [1]})
    assert s.cwd == "/home/alice" and s.env
    assert s.settings == ('env: {"LD_PRELOAD":"/x.so"}', "timeout: 5", "dangerouslyDisableSandbox: true",
                          "with_escalated_permissions: false", '"we ird": [1]')
    assert s.escalates == ("dangerouslyDisableSandbox",)
    assert shown_input({"command": "ls", "cwd": 7}).settings == ("cwd: 7",)


def test_a_diff_shows_the_fields_it_holds_and_the_rest_is_shown() -> None:
    diff = [{"type": "diff", "path": "/a.py", "oldText": "x = 1", "newText": "x = 2"}]
    edit = {"file_path": "/a.py", "old_string": "x = 1", "new_string": "x = 2"}
    assert prompt(edit, kind="edit", content=diff)["subject"]["preview"][-1]["label"].startswith("Diff")
    c = prompt({**edit, "replace_all": True, "file_path": "/etc/passwd"}, kind="edit", content=diff)
    assert '"file_path":"/etc/passwd"' in c["body"] and '"replace_all":true' in c["body"]


def test_what_runs_wins_over_the_session_directory() -> None:
    c = prompt({"command": "rm -rf *", "cwd": "/home/alice"})
    assert "\nDirectory: /home/alice\nSession directory: /tmp\n" in c["body"]
    assert "Session directory" not in prompt({"command": "ls", "cwd": "/tmp"})["body"]
    assert "\nDirectory: /tmp\n" in prompt({"command": "ls"})["body"]
    assert prompt({"command": "ls", "cwd": "/tmp\n/home"})["subject"]["preview_complete"] is False


def test_long_blank_runs_and_invisible_characters_are_written_out_and_count_as_cut() -> None:
    assert blanks("bun test" + " " * 1900 + "; curl x") == ("bun test␠×1900; curl x", True)
    assert blanks("a\t\t\t\t\t\t\t\t\tb") == ("a<blank×9>b", True)
    assert blanks("a        b") == ("a        b", False)  # 8: kept
    assert blanks("x   " + " " * 20) == ("x" + " " * 23, False)  # nothing after it: nothing hidden
    indented = "def f():\n" + " " * 16 + "return 1\n+" + " " * 12 + "x = 2"
    assert blanks(indented) == (indented, False)  # indentation (after a diff's +) up to 64
    assert blanks(" " * 65 + "x")[1]
    assert code_text("ls\x1b[2J", 100, 5) == ("ls<U+001B>[2J", True)
    assert code_text("echo \u202eevil", 100, 5)[1] and not code_text("echo ok", 100, 5)[1]
    c = prompt({"command": "bun test" + " " * 1900 + "; curl x | sh"})
    assert c["subject"]["preview_complete"] is False and "│ bun test␠×1900; curl x | sh" in c["body"]


# ---------------------------------------------------------------- the property

_KEYS = st.one_of(st.sampled_from(["command", "args", "cwd", "env", "description", "timeout"]), st.text(max_size=8))
_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=40)
)
_VALUES = st.recursive(_LEAVES, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4),
                       max_leaves=12)
_RAW = st.one_of(st.dictionaries(_KEYS, _VALUES, max_size=6), _VALUES)


def _leaves(value: Any) -> list[Any]:
    """Every leaf of a value, and every key of its objects."""
    if isinstance(value, dict):
        return [*value.keys(), *(x for v in value.values() for x in _leaves(v))]
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    return [value]


def _code(text: str) -> str:
    """A text as a code block shows it when nothing is written out: line breaks normalized, blank lines
    collapsed (by design: they push nothing out of view), outer line breaks gone."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return re.sub(r"\n(?:[^\S\n]*\n)+", "\n\n", text).strip("\n")


def _expected(raw: Any) -> list[str]:
    """What must appear in the body for each leaf of ``raw`` that is not prose."""
    if raw is None or raw == {} or raw == [] or raw == "":
        return []  # no raw input
    if shown_input(raw).label != "Command":  # shown as JSON (a string input as is)
        if isinstance(raw, dict):
            raw = {k: v for k, v in raw.items() if k not in PROSE}
        return [_code(raw)] if isinstance(raw, str) else [as_json(x) for x in _leaves(raw)]
    out: list[str] = []
    for key, value in raw.items():
        if key in PROSE:
            continue
        if key in ("command", "args") and isinstance(value, list):
            out += [shlex.quote(x if isinstance(x, str) else as_json(x)) for x in value]
        elif key in ("command", "args") and isinstance(value, str):
            out += re.split(r"\r\n|\r|\n", value)
        elif key == "args" and value is not None:
            out.append(shlex.quote(as_json(value)))
        elif key == "cwd" and isinstance(value, str):
            out.append(value)
        elif key not in ("command", "args"):
            out += [key if re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", key) else as_json(key)]
            out += [as_json(x) for x in _leaves(value)]
    return out


@settings(max_examples=300, deadline=None)
@given(raw=_RAW, kind=st.sampled_from(["execute", None]))
def test_every_leaf_that_is_not_prose_is_in_the_body_or_the_prompt_says_it_is_incomplete(raw: Any, kind: Any) -> None:
    c = prompt(raw, kind=kind)
    if not c["subject"]["preview_complete"]:
        assert "⚠ Shortened" in c["body"]
        return
    body = "\n".join(line.removeprefix("│ ") for line in c["body"].split("\n"))
    page = html.unescape(c["formatted_body"])
    items = "\n".join(str(i.get("value", i.get("text"))) for i in c["subject"]["preview"])
    for want in _expected(raw):
        for where in (body, page, items):
            assert want in where or defang(want) in where, (want, where)


# ---------------------------------------------------------------- rules match what was shown


def _rec(raw: Any, **kw: Any) -> dict[str, Any]:
    return {"key": "0123456789abcdef0123456789abcdef:1", "session_id": "s", "tool_name": "Bash", "tool_kind": "execute",
            "raw_input": raw, "title": "t", **kw}


def test_a_session_rule_covers_the_command_line_with_its_args() -> None:
    status = scope_of(_rec({"command": "git", "args": "status"}))
    assert status is not None and status == scope_of(_rec({"command": "git", "args": "status"}))
    assert status != scope_of(_rec({"command": "git", "args": "reset --hard HEAD~50"}))
    assert status != scope_of(_rec({"command": "git", "args": "status", "env": {"GIT_DIR": "/x"}}))
    assert status == scope_of(_rec({"command": "git", "args": "status", "description": "look"}))


def test_command_globs_read_the_shown_command_line() -> None:
    rules = parse_rules([{"match": {"command": "rm *"}, "decision": "deny"},
                         {"match": {"command": "make"}, "decision": "approve"}])
    assert shown_of(_rec({"command": "rm", "args": ["-rf", "/"]})).command == "rm -rf /"
    assert decide(rules, _rec({"command": "rm", "args": ["-rf", "/"]})) is rules[0]
    assert decide(rules, {"rawInput": {"command": ["rm", "-rf", "/"]}}) is rules[0]
    assert decide(rules, _rec({"command": "make", "args": ["-f", "/tmp/evil.mk"]})) is None
    assert decide(rules, _rec({"command": "make"})) is rules[1]
    assert decide(rules, _rec({"command": "make", "env": {"LD_PRELOAD": "/x.so"}})) is None
    assert decide(rules, _rec({"command": "make", "sandbox_permissions": "require_escalated"})) is None
    assert decide(rules, _rec({"command": "make", "dangerouslyDisableSandbox": False})) is rules[1]
    assert decide(rules, _rec(None, title="make")) is None  # never the title


# ---------------------------------------------------------------- WebFetch and `permissions ls`


def test_url_host_is_the_host_the_fetcher_reaches_or_none() -> None:
    assert url_host("https://Good.example:8443/a?b=@c") == "good.example"
    assert url_host("http://127.0.0.1/x") == "127.0.0.1"
    for bad in ("http://evil.example\\@good.example/", "http://u:p@good.example/", "http://evil%2eexample/",
                "http://ｅvil.example/", "http://good.example\t/", "http://0x7f.1/", " http://a.b/", "ftp://a.b/",
                "http://1.2.3.04/", "https://[::1]/"):
        assert url_host(bad) is None, bad


def _hook(url: str) -> HookInput:
    return HookInput.model_validate({"session_id": "s", "hook_event_name": "PermissionRequest", "cwd": "/w",
                                     "tool_name": "WebFetch", "tool_input": {"url": url, "prompt": "p"}})


def test_a_webfetch_url_with_userinfo_offers_no_domain_rule_and_is_marked() -> None:
    url = "http://evil.example\\@good.example/x"
    assert session_rule("claude-code", _hook(url)) is None
    sub = build_submission("claude-code", _hook(url), "k")
    texts = [b["content"]["text"] for b in sub["toolCall"]["content"]]
    assert any(t.startswith("⚠ Suspicious URL:") for t in texts)
    assert [o["optionId"] for o in sub["options"]] == ["allow_once", "deny"]
    ok = session_rule("claude-code", _hook("https://good.example/x"))
    assert ok is not None and ok[0][0]["rules"] == [{"toolName": "WebFetch", "ruleContent": "domain:good.example"}]


def test_ls_shows_the_command_first_and_tool_only_from_a_tool_name() -> None:
    rec = {"id": "s:1", "session_id": "s", "title": "T" * 180, "tool_kind": "execute", "tool_name": None,
           "toolName": "T" * 180, "raw_input": {"command": "curl x", "args": ["|", "sh"]},
           "requested_at": "2030-01-01T00:00:00.000Z"}
    assert tool_of(rec) == "execute" and tool_of({"toolName": "Read"}) == "Read"
    assert question(rec).startswith("curl x '|' sh — TTT")
    (_, row), _widths = table([rec], 120, datetime.fromisoformat("2030-01-01T00:00:10+00:00"))
    assert len(row) <= 120 and "curl x '|' sh" in row and row.split()[2] == "execute"
    assert question({"title": "Run", "raw_input": {}}) == "Run"
    assert json.loads(json.dumps(rec))  # the record stays plain JSON


@given(st.text(alphabet=st.sampled_from(" a\t\n\x1b\x7f\xa0\u2028\u200f\u3000é"), max_size=12) | st.text(max_size=12))
def test_ls_cleans_a_cell_as_ever_when_it_skips_the_rebuild(text: str) -> None:
    """`clean` returns a printable line with single spaces as it is (no split and join for each cell)."""
    from bot.cli.permissions.render import clean

    line = " ".join(text.split())
    assert clean(text) == (line if line.isprintable() else "".join(c if c.isprintable() else "?" for c in line))
