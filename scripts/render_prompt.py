"""What a prompt looks like: the seed example's real ``formatted_body`` in a page styled like Element's timeline.

``python scripts/render_prompt.py [OUT]`` writes the page (default: stdout); ``docs/prompt-rendered.html``
is its output. The HTML of both messages comes from :mod:`bot.prompts`, byte for byte as the bot
sends it: the prompt as posted, then the same prompt after the bot's settling edit.
"""

from __future__ import annotations

import argparse
import html
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from bot.answers import KEYCAPS
from bot.prompts import build_prompt, build_settled
from bot.util.digest import digest_params

BOT = "@permbot:example.org"
ALICE = "@alice:example.org"

# The seed's example (CONTRACT.md, seeds/000): a command with all four ACP option kinds.
PARAMS: dict[str, Any] = {
    "sessionId": "acps_3f0c",
    "toolCall": {
        "toolCallId": "call_1",
        "title": "Run the test suite",
        "kind": "execute",
        "rawInput": {"command": "bun test"},
        "locations": [{"path": "apps/hub"}],
    },
    "options": [
        {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
        {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
        {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
        {"optionId": "reject_always", "name": "Never allow", "kind": "reject_always"},
    ],
}


def seed_prompt() -> dict[str, Any]:
    """The prompt content the bot posts for the seed example (request 12 of session acps_3f0c)."""
    tc = PARAMS["toolCall"]
    return build_prompt(
        request_id="acps_3f0c:12",
        session_id="acps_3f0c",
        request_seq=12,
        title=tc["title"],
        tool_kind=tc["kind"],
        options=PARAMS["options"],
        raw_input=tc["rawInput"],
        locations=tc["locations"],
        content=[],
        digest=digest_params(PARAMS),
        revision=1,
        expires_at=datetime(2026, 11, 7, 10, 30, tzinfo=UTC),
    )


def seed_settled(prompt: dict[str, Any]) -> dict[str, Any]:
    """The same prompt once Alice has answered "1" with a reply."""
    return build_settled(
        prompt,
        state="resolved",
        option_id="allow_once",
        option_name=None,
        answered_by=ALICE,
        via="matrix",
        feedback=None,
        decided_at=datetime(2026, 11, 7, 10, 16, 5, tzinfo=UTC),
    )


_CSS = """
:root { --text: #17191c; --muted: #737d8c; --line: #e3e8f0; --quiet: #f4f6fa; --accent: #0dbd8b; }
* { box-sizing: border-box; }
body { margin: 0; background: #fff; color: var(--text);
  font: 15px/22px Inter, "Twemoji", "Apple Color Emoji", "Segoe UI Emoji", system-ui, -apple-system,
  "Segoe UI", Roboto, Helvetica, Arial, sans-serif; }
.room { max-width: 760px; margin: 0 auto; border-left: 1px solid var(--line); border-right: 1px solid var(--line);
  min-height: 100vh; }
.header { display: flex; align-items: center; gap: 12px; padding: 12px 20px; border-bottom: 1px solid var(--line); }
.header .avatar { background: #5c56f5; }
.header h1 { font-size: 18px; line-height: 24px; margin: 0; font-weight: 600; }
.header p { margin: 0; color: var(--muted); font-size: 13px; }
.caption { margin: 20px 20px 4px 64px; color: var(--muted); font-size: 12px; text-transform: uppercase;
  letter-spacing: .04em; }
.tile { position: relative; padding: 6px 20px 6px 64px; }
.tile:hover { background: var(--quiet); }
.avatar { position: absolute; left: 20px; top: 8px; width: 32px; height: 32px; border-radius: 50%;
  color: #fff; font-weight: 600; font-size: 18px; line-height: 32px; text-align: center; }
.header .avatar { position: static; }
.sender { font-weight: 600; }
.ts { color: var(--muted); font-size: 12px; margin-left: 8px; }
.edited { color: var(--muted); font-size: 12px; }
.body p { margin: 0 0 4px; }
.body ol { margin: 4px 0; padding-left: 24px; }
.body pre { background: var(--quiet); border: 1px solid var(--line); border-radius: 8px; padding: 8px 12px;
  margin: 4px 0 8px; overflow-x: auto; }
.body code { font-family: "Inconsolata", "Fira Code", ui-monospace, Menlo, Consolas, monospace; font-size: 14px; }
.body p code, .body li code { background: var(--quiet); border-radius: 4px; padding: 0 4px; }
.reactions { display: flex; gap: 4px; margin-top: 4px; }
.reaction { border: 1px solid var(--line); border-radius: 12px; padding: 0 8px; font-size: 13px; line-height: 22px;
  background: #fff; }
.reaction.mine { border-color: var(--accent); background: #e7f8f3; }
.reply { border-left: 3px solid #368bd6; padding: 2px 8px; margin: 2px 0 6px; color: var(--muted); font-size: 13px;
  line-height: 18px; }
.reply b { color: #368bd6; }
.note { margin: 24px 20px 24px 64px; color: var(--muted); font-size: 12px; }
"""


def _tile(
    sender: str,
    name: str,
    color: str,
    ts: str,
    inner: str,
    *,
    edited: bool = False,
    reactions: Sequence[tuple[str, int, bool]] = (),
    reply_to: tuple[str, str] | None = None,
) -> str:
    """One timeline tile; ``inner`` is trusted HTML (a formatted_body as sent)."""
    out = [
        '<div class="tile">',
        f'<div class="avatar" style="background:{color}">{html.escape(name[0].upper())}</div>',
        f'<div><span class="sender" style="color:{color}" title="{html.escape(sender)}">{html.escape(name)}</span>'
        f'<span class="ts">{ts}</span></div>',
    ]
    if reply_to:
        who, text = reply_to
        out.append(f'<div class="reply"><b>{html.escape(who)}</b><br>{html.escape(text)}</div>')
    mark = ' <span class="edited">(edited)</span>' if edited else ""
    out.append(f'<div class="body">{inner}{mark}</div>')
    if reactions:
        pills = "".join(
            f'<span class="reaction{" mine" if mine else ""}">{key} {n}</span>' for key, n, mine in reactions
        )
        out.append(f'<div class="reactions">{pills}</div>')
    out.append("</div>")
    return "\n".join(out)


def render_page() -> str:
    """The whole page, deterministic (fixed example, fixed times)."""
    prompt = seed_prompt()
    settled = seed_settled(prompt)
    seeded = [(k, 1, False) for k in KEYCAPS[: len(PARAMS["options"])]]
    green, blue = "#0dbd8b", "#368bd6"
    first_line = str(prompt["body"]).splitlines()[0]
    tiles = [
        '<div class="caption">The prompt, as posted</div>',
        _tile(BOT, "permbot", green, "10:15", str(prompt["formatted_body"]), reactions=seeded),
        _tile(ALICE, "alice", blue, "10:16", "1", reply_to=("permbot", first_line)),
        '<div class="caption">The same prompt after the answer (the bot edits it)</div>',
        _tile(BOT, "permbot", green, "10:15", str(settled["formatted_body"]), edited=True, reactions=seeded),
    ]
    return page(
        "Generated by `python scripts/render_prompt.py docs/prompt-rendered.html`; the message HTML is the\n"
        "     formatted_body that bot.prompts builds for the seed example (seeds/000), unchanged.",
        "what a prompt looks like", _CSS, tiles,
        note='<p class="note">Answer with a reply or a thread message naming the option (<code>1</code>, '
        "<code>#1</code>,\n<code>allow once</code>), or tap a keycap reaction. "
        "The first valid answer from an answerer wins.</p>\n",
    )


def page(comment: str, title: str, css: str, tiles: Sequence[str], note: str = "") -> str:
    """A station room's page as Element shows it: ``tiles`` (messages and captions) under the room's header."""
    return f"""<!doctype html>
<!-- {comment} -->
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>permission-bot: {title}</title>
<style>{css}</style>
</head>
<body>
<div class="room">
<div class="header"><div class="avatar">#</div><div><h1>agents</h1>
<p>The station room: agents ask here, answerers reply</p></div></div>
{chr(10).join(tiles)}
{note}</div>
</body>
</html>
"""


def write(page: str, argv: Sequence[str] | None = None) -> int:
    """Write ``page`` to the path in ``argv`` (default: the command line's), or to stdout."""
    parser = argparse.ArgumentParser(description="Render the demo prompts as Element would show them.")
    parser.add_argument("path", nargs="?", help="the HTML file to write (default: standard output)")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.path:
        with open(args.path, "w", encoding="utf-8") as f:
            f.write(page)
    else:
        sys.stdout.write(page)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Write the page to the path in ``argv`` (or stdout)."""
    return write(render_page(), argv)


if __name__ == "__main__":
    raise SystemExit(main())
