"""The prompt's prose: ``body`` and ``formatted_body``. Pure.

The body says what the HTML says: the title, who asks, where it runs, the command line and its settings
(or a diff summary), the details, where, a warning when anything was cut, the options numbered in the
shown order, how to answer. Agent text
never starts a line: prose follows a bot prefix (``Permission needed:``, ``Agent:``, ``2.``) and code
lines follow a gutter (``│ ``), so nothing the agent writes can pass for a banner or an option line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bot.prompts.preview import OUTSIDE, DiffSummary, Preview
from bot.prompts.text import esc, title_html

ANSWER_HINT = "Reply with the number, or the option's name."
HINT_START = "Reply with the number"


def answer_hint(deny: int | None) -> str:
    """The prompt's last line: how to answer, and which number denies (it differs by route: 2, 3 or 4)."""
    if deny is None:
        return "Reply with the number, or the option's name (no option denies)."
    return f"Reply with the number ({deny} denies), or the option's name."
GUTTER = "│ "
SHORTENED = (
    "⚠ Shortened: this prompt does not show everything the agent sent as it was sent (cut, or long blanks "
    "and invisible characters written out); the full text follows in its thread. "
    "A plain number cannot answer it: reply to this message, or answer in its thread."
)


def hint_html(deny: int | None) -> str:
    return f"<p>{esc(answer_hint(deny))}</p>"


def _diff_line(d: DiffSummary) -> str:
    what = "new file, " if d.new_file else ""
    return f"Diff: {d.path} ({what}+{d.added} −{d.removed} lines)"


def _block(label: str, text: str) -> list[str]:
    return [f"{label}:", *(GUTTER + line for line in text.split("\n"))]


def body(title: str, preview: Preview, labels: Sequence[str], deny: int | None = None) -> str:
    """The plain-text body. ``title`` and ``labels`` are shown forms (see :func:`text.prose`); ``deny``: the
    number of the option that denies (said on the last line)."""
    lines = [f"Permission needed: {title}"]
    fields = {item["label"]: item["value"] for item in preview.items if item["type"] == "field"}
    for name in ("Agent", "Directory", "Session directory", "Tool", "Kind", OUTSIDE):
        if name in fields:
            lines.append(f"{name}: {fields[name]}")
    if preview.command is not None:
        lines += _block(*preview.command)
    if preview.settings is not None:
        lines += _block("Settings", preview.settings)
    lines += [_diff_line(d) for d in preview.diffs]
    if preview.details:  # one label over all of them (a hook's description and its session line)
        lines += _block("Details", "\n".join(preview.details))
    lines += [f"Location: {item['value']}" for item in preview.items if item["label"] == "Location"]
    if not preview.complete:
        lines.append(SHORTENED)
    lines.append("")
    lines += [f"{n}. {label}" for n, label in enumerate(labels, 1)]
    lines += ["", answer_hint(deny)]
    return "\n".join(lines)


def formatted(title: str, labels: Sequence[str], preview: Preview, deny: int | None = None) -> str:
    """The HTML body: the same content; the title's inline code as ``<code>``, all else escaped."""
    items: Sequence[Mapping[str, Any]] = preview.items
    parts = [f"<p><strong>Permission needed:</strong> {title_html(title)}</p>"]
    fields = []
    for item in items:
        if item.get("type") == "field":
            value = esc(str(item.get("value", "")))
            if item.get("label") in ("Location", "Directory", "Session directory"):
                value = f"<code>{value}</code>"
            fields.append(f"<b>{esc(str(item.get('label', '')))}:</b> {value}")
    if fields:
        parts.append("<p>" + "<br>".join(fields) + "</p>")
    last = ""
    for item in items:
        if item.get("type") == "text":
            label = str(item.get("label", ""))
            lang = ' class="language-diff"' if label.startswith("Diff") else ""
            head = "" if label == last == "Details" else f"<p><b>{esc(label)}</b></p>"  # one label over details
            parts.append(f"{head}<pre><code{lang}>{esc(str(item.get('text', '')))}</code></pre>")
            last = label
    if not preview.complete:
        parts.append(f"<p><strong>{esc(SHORTENED)}</strong></p>")
    parts.append("<ol>" + "".join(f"<li>{esc(label)}</li>" for label in labels) + "</ol>")
    parts.append(hint_html(deny))
    return "".join(parts)
