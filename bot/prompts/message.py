"""The prompt's prose: ``body`` and ``formatted_body``. Pure.

The body says what the HTML says: the title, who asks, where it runs, the command line and its settings
(or a diff summary), the details, where, a warning when anything was cut, the options numbered in the
shown order, how to answer. Agent text
never starts a line: prose follows a bot prefix (``Permission needed:``, ``Agent:``, ``2.``) and code
lines follow a gutter (``│ ``), so nothing the agent writes can pass for a banner or an option line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bot.prompts.preview import Preview
from bot.prompts.text import esc, title_html

HINT_START = "Reply with "  # every answer hint starts so (a question's and a plan's too)


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


def block(label: str, text: str) -> list[str]:
    """A text behind the gutter, under its ``label:`` line."""
    return [f"{label}:", *(GUTTER + line for line in text.split("\n"))]


def block_html(label: str, text: str, *, head: bool = True, lang: bool = True) -> str:
    """A text as a code block under its label (``head``); a diff's (with ``lang``) marked as one."""
    cls = ' class="language-diff"' if lang and label.startswith("Diff") else ""
    return ("" if not head else f"<p><b>{esc(label)}</b></p>") + f"<pre><code{cls}>{esc(text)}</code></pre>"


def warn(text: str, lines: list[str], html: list[str]) -> None:
    """A line of the bot's own, in bold in the HTML."""
    lines.append(text)
    html.append(f"<p><strong>{esc(text)}</strong></p>")


def _field_html(item: Mapping[str, str]) -> str:
    value = esc(item["value"])
    if item["label"] in ("Location", "Directory", "Session directory"):
        value = f"<code>{value}</code>"
    return f"<b>{esc(item['label'])}:</b> {value}"


def render(title: str, preview: Preview, labels: Sequence[str], deny: int | None = None) -> tuple[str, str]:
    """The plain-text body and its HTML. ``title`` and ``labels`` are shown forms (see :func:`text.prose`);
    ``deny``: the number of the option that denies (said on the last line). The HTML says the same (a diff in
    full where the body sums it up): the title's inline code as ``<code>``, all else escaped."""
    lines = [f"Permission needed: {title}"]
    html = [f"<p><strong>Permission needed:</strong> {title_html(title)}</p>"]
    fields = [item for item in preview.items if item["type"] == "field"]
    lines += [f"{item['label']}: {item['value']}" for item in fields if item["label"] != "Location"]
    if fields:
        html.append("<p>" + "<br>".join(_field_html(item) for item in fields) + "</p>")
    diffs, last = iter(preview.diffs), ""
    for item in preview.items:
        if item["type"] == "text":
            label, text = item["label"], item["text"]
            head = not label == last == "Details"  # one label over all the details
            html.append(block_html(label, text, head=head))
            if label.startswith("Diff"):
                d = next(diffs)
                lines.append(f"Diff: {d.path} ({'new file, ' if d.new_file else ''}+{d.added} −{d.removed} lines)")
            else:
                lines += block(label, text) if head else [GUTTER + line for line in text.split("\n")]
            last = label
    lines += [f"Location: {item['value']}" for item in fields if item["label"] == "Location"]
    if not preview.complete:
        warn(SHORTENED, lines, html)
    lines += ["", *(f"{n}. {label}" for n, label in enumerate(labels, 1)), "", answer_hint(deny)]
    html.append("<ol>" + "".join(f"<li>{esc(label)}</li>" for label in labels) + "</ol>")
    html.append(f"<p>{esc(answer_hint(deny))}</p>")
    return "\n".join(lines), "".join(html)
