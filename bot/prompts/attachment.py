"""The full text of a shortened prompt, posted in its thread so that a person can read what they approve. Pure.

The prompt keeps to its byte budget and says when it was cut; this notice carries the command, the diffs
and the details again, with far larger limits (one Matrix event still caps it: what does not fit is said).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from bot.prompts.message import block, block_html, warn
from bot.prompts.preview import gather
from bot.prompts.text import code_shown, esc, prose

ATTACHMENT_BUDGET = 28_000  # UTF-8 bytes of the content: body and HTML both carry the text
_CHAR_STEPS = (12_000, 6_000, 3_000, 1_500)
_LINE_STEPS = (1_000, 500, 250, 120)


def full_text_content(
    *, request_id: str, title: str, tool_kind: str | None, raw_input: Any, content: Sequence[object]
) -> dict[str, Any]:
    """An ``m.notice`` (no relation yet) with the full command, diffs and details of a request."""
    facts = gather(raw_input=raw_input, tool_kind=tool_kind, title=title, locations=[], content=content)
    parts: list[tuple[str, str]] = []
    if facts.shown.cwd is not None:
        parts.append(("Directory", facts.shown.cwd))
    if facts.shown.label is not None:
        parts.append((facts.shown.label, facts.shown.text))
    if facts.shown.settings:
        parts.append(("Settings", "\n".join(facts.shown.settings)))
    parts += [(f"Diff: {prose(path, 200)}", diff) for path, diff, _ in facts.diffs]
    parts += [("Details", text) for text in facts.texts]
    result: dict[str, Any] = {}
    for chars, lines in zip(_CHAR_STEPS, _LINE_STEPS, strict=True):
        result = _content(request_id, parts, chars, lines, more=facts.more)
        if len(json.dumps(result, ensure_ascii=False).encode()) <= ATTACHMENT_BUDGET:
            break
    return result


def _content(request_id: str, parts: list[tuple[str, str]], chars: int, lines: int, *, more: bool) -> dict[str, Any]:
    head = f"Full text of request {prose(request_id, 200)} (its prompt shows it shortened):"
    body, html = [head], [f"<p>{esc(head)}</p>"]
    cut_any = more
    for label, text in parts:
        shown, was_cut, _ = code_shown(text, chars, lines)  # written out is still all there
        cut_any = cut_any or was_cut
        body += block(label, shown)
        html.append(block_html(label, shown, lang=False))
    if cut_any:
        warn("⚠ Still shortened here: read the whole request from the bot's HTTP API or `permissions ls --json`.",
             body, html)
    return {
        "msgtype": "m.notice",
        "body": "\n".join(body),
        "format": "org.matrix.custom.html",
        "formatted_body": "".join(html),
        "m.mentions": {},
    }
