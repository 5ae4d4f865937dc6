"""A question or a plan -> the prompt's prose, HTML and preview (bot.events.kinds). Pure.

A **question** shows the question, its topic (the agent's header), who asks, whether several choices may be
given (a link to open, URL mode: the host a browser opens it on and the link, each on a line of the bot's
own, :func:`bot.util.linkhost.link_host`), then its choices numbered from 1 in the agent's order with their
descriptions beside them, and decline last. A **plan** shows the plan itself: rendered from Markdown in the
HTML (:mod:`bot.prompts.markdown`, inside a block quote), and as text behind a gutter in the body, then
everything else the request carries that the agent acts on (a command, its settings, a diff, other text: the
preview of the request less its plan, :func:`plan_rest`), then the agent's options by meaning.

As everywhere, agent text never starts a line of the body: it follows a bot prefix (``Question:``, ``2.``) or
the gutter (``│ ``), and prose has its mentions defanged. A plan too long for one event is cut at a line with a
line saying so; the whole plan follows in the prompt's thread (:func:`plan_parts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.events.kinds import Question
from bot.prompts.markdown import render
from bot.prompts.message import GUTTER, SHORTENED, block, block_html, warn
from bot.prompts.preview import Preview
from bot.prompts.text import code_line, defang, esc, prose, prose_cut, valid, visible
from bot.util.linkhost import link_host, shown_host

QUESTION_HINT = (
    "Reply with a number or a choice's name (several, if allowed: 1, 3), or reply to this message with your "
    "own answer."
)
QUESTION_HINT_CLOSED = "Reply with a number or a choice's name (several, if allowed: 1, 3)."
PLAN_HINT = "Reply with the number, or the option's name; to keep planning with feedback: the number - what to change."
PLAN_CUT = "⚠ The plan is cut here: the whole plan follows in this prompt's thread. Reply to this message to answer."
DECLINE_LABEL = "Decline (answer none of the agent's questions)"
ALSO = "Also in this request (the agent acts on it too):"
PLAN_STEPS = (None, 8_000, 4_000, 2_000, 1_000, 400)
"""Characters of the plan shown, step by step, until the prompt fits its budget (None: all of it)."""


@dataclass
class Shown:
    """One prompt's prose, HTML and preview items."""

    title: str
    body: str
    html: str
    items: list[dict[str, str]] = field(default_factory=list)
    complete: bool = True


Out = tuple[list[str], list[str], list[dict[str, str]]]
"""Where a field goes: the body's lines, the HTML's field lines, the preview items."""


def _field(out: Out, label: str, value: str, *, code: bool = False) -> None:
    lines, html, items = out
    lines.append(f"{label}: {value}")
    html.append(f"<b>{label}:</b> " + (f"<code>{esc(value)}</code>" if code else esc(value)))
    items.append({"type": "field", "label": label, "value": value})


def _who(agent: str, cwd: str, out: Out) -> None:
    if agent:
        _field(out, "Agent", prose(agent, 200))
    if cwd:
        _field(out, "Directory", code_line(cwd, 500)[0], code=True)


def question(
    q: Question, labels: Sequence[tuple[str, str]], *, agent: str, cwd: str, form: tuple[int, int] | None, short: bool
) -> Shown:
    """A question's prompt. ``labels``: (option id, label) in the shown order (decline last)."""
    text, cut_q = prose_cut(q.text, 300 if short else 2000)
    items: list[dict[str, str]] = [{"type": "field", "label": "Question", "value": text}]
    lines = [f"Question: {text}"]
    html = [f"<p><strong>Question:</strong> {esc(text)}</p>"]
    fields: list[str] = []
    descriptions = dict(q.descriptions)
    out = (lines, fields, items)
    if q.url:  # the bot's own lines: the agent's words stay on the Question line (prose is one line)
        host = prose(shown_host(link_host(q.url)), 400)  # question_of refused a link it cannot read
        _field(out, "Host", host)
        _field(out, "Link", code_line(q.url, 2000)[0], code=True)
        descriptions = {label: f"I opened the link on {host} and finished there" for _, label in labels[:-1]}
    if q.header.strip():
        _field(out, "Topic", prose(q.header, 200))
    _who(agent, cwd, out)
    how = "several choices allowed: give their numbers or names, separated by commas" if q.multi else "one choice"
    if len(labels) == 1:  # decline alone: the answer is the person's words
        how = {"number": "a number", "integer": "a whole number"}.get(q.answer_type, "your own words")
        how += ", as a reply to this message"
    if form is not None and form[1] > 1:
        how = f"question {form[0]} of {form[1]}; {how}"
    lines.append(f"Answer: {how}")
    fields.append(f"<b>Answer:</b> {esc(how)}")
    html.append("<p>" + "<br>".join(fields) + "</p>")
    lines.append("")
    entries: list[str] = []
    for n, (oid, label) in enumerate(labels, 1):
        name = prose(label, 100 if short else 200) or prose(oid, 100) or f"choice {n}"
        if n == len(labels):  # the decline option
            name = DECLINE_LABEL
        desc = descriptions.get(label, "") if n < len(labels) else ""
        shown_desc = prose(desc, 80 if short else 300) if desc.strip() else ""
        lines.append(f"{n}. {name}" + (f": {shown_desc}" if shown_desc else ""))
        entries.append(f"<li><b>{esc(name)}</b>" + (f": <em>{esc(shown_desc)}</em>" if shown_desc else "") + "</li>")
    html.append("<ol>" + "".join(entries) + "</ol>")
    hint = QUESTION_HINT if q.free_text else QUESTION_HINT_CLOSED
    lines += ["", hint]
    html.append(f"<p>{esc(hint)}</p>")
    return Shown(title=text, body="\n".join(lines), html="".join(html), items=items, complete=not cut_q)


def plan_text(raw_input: Any) -> str:
    """The plan of a ``plan`` request (``rawInput.plan``), as sent."""
    plan = raw_input.get("plan") if isinstance(raw_input, dict) else None
    return valid(plan) if isinstance(plan, str) else ""


def cut_plan(plan: str, limit: int | None) -> tuple[str, bool]:
    """The plan's first ``limit`` characters, cut at a line end; whether it was cut."""
    if limit is None or len(plan) <= limit:
        return plan, False
    head = plan[:limit]
    return (head[: head.rfind("\n")] if "\n" in head else head), True


def plan_rest(raw_input: Any, content: Sequence[Any]) -> tuple[Any, list[Any]]:
    """A plan request's raw input and content less the plan itself: what else the agent will act on."""
    plan_ = plan_text(raw_input)
    rest = {k: v for k, v in raw_input.items() if k != "plan"} if isinstance(raw_input, dict) else raw_input
    blocks = [b for b in content if not (isinstance(b, dict) and b.get("type") == "content"
                                         and isinstance(b.get("content"), dict)
                                         and b["content"].get("text") == plan_)]
    return rest, blocks


def _also(rest: Preview, lines: list[str], html: list[str], items: list[dict[str, str]]) -> None:
    """The rest of a plan request, as the prompt shows it: every text item (command, settings, diffs,
    details) behind a gutter, and every field."""
    if not rest.items:
        return
    warn(ALSO, lines, html)
    for item in rest.items:
        label = item["label"]
        if item["type"] == "text":
            lines += block(label, item["text"])
            html.append(block_html(label, item["text"]))
        else:
            lines.append(f"{label}: {item['value']}")
            html.append(f"<p><b>{esc(label)}:</b> {esc(item['value'])}</p>")
        items.append(item)


def plan(
    title: str, raw_input: Any, labels: Sequence[str], *, agent: str, cwd: str, limit: int | None,
    rest: Preview | None = None,
) -> Shown:
    """A plan's prompt with at most ``limit`` characters of the plan. ``labels``: the options' shown forms;
    ``rest``: the preview of everything else the request carries (:func:`plan_rest`), shown after the plan."""
    head = prose(title, 300) or "Approve the plan"
    items: list[dict[str, str]] = []
    lines = [f"Plan to approve: {head}"]
    html = [f"<p><strong>Plan to approve:</strong> {esc(head)}</p>"]
    who_html: list[str] = []
    _who(agent, cwd, (lines, who_html, items))
    if who_html:
        html.append("<p>" + "<br>".join(who_html) + "</p>")
    text, was_cut = cut_plan(visible(plan_text(raw_input)).strip("\n"), limit)
    text = defang(text)
    items.append({"type": "text", "label": "Plan", "text": text})
    lines += block("Plan", text)
    html.append(f"<blockquote>{render(text)}</blockquote>")
    if was_cut:
        warn(PLAN_CUT, lines, html)
    complete = not was_cut
    if rest is not None:
        _also(rest, lines, html, items)
        complete = complete and rest.complete
        if not rest.complete:
            warn(SHORTENED, lines, html)
    lines += ["", *(f"{n}. {label}" for n, label in enumerate(labels, 1)), "", PLAN_HINT]
    html.append("<ol>" + "".join(f"<li>{esc(label)}</li>" for label in labels) + "</ol>")
    html.append(f"<p>{esc(PLAN_HINT)}</p>")
    return Shown(title=head, body="\n".join(lines), html="".join(html), items=items, complete=complete)


PART_CHARS = 9_000


def plan_parts(raw_input: Any) -> list[tuple[str, str]]:
    """The whole plan in parts that each fit one notice: (body, HTML) of each, in order."""
    text = defang(visible(plan_text(raw_input)).strip("\n"))
    chunks: list[str] = []
    while text:
        chunk, _ = cut_plan(text, PART_CHARS)
        chunk = chunk or text[:PART_CHARS]
        chunks.append(chunk)
        text = text[len(chunk) :].lstrip("\n")
    out = []
    for n, chunk in enumerate(chunks, 1):
        head = f"The whole plan, part {n} of {len(chunks)}:" if len(chunks) > 1 else "The whole plan:"
        body = "\n".join([head, *(GUTTER + line for line in chunk.split("\n"))])
        out.append((body, f"<p>{esc(head)}</p><blockquote>{render(chunk)}</blockquote>"))
    return out
