"""What the agent would do, from the facts of the request: the ``subject.preview`` items and their summary.

Labels come from facts only: the Tool line from a real tool name (the harness's ``_meta`` tool name),
the Kind line from the kind; the command line, its directory and its settings as
:func:`bot.prompts.shown.shown_input` says (the one place that decides what of ``rawInput`` is shown).
Pure.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any, TypeVar

from bot.prompts.shown import Shown, shown_input
from bot.prompts.text import code_line, code_text, cut, prose, prose_cut

OUTSIDE = "⚠ Outside the sandbox"  # the field naming settings that ask for more than the sandbox
MAX_COMMAND = 2000
MAX_DIFF = 4000
MAX_ITEMS = 5
MAX_LABEL = 200
T = TypeVar("T")
MAX_LINES = 80  # lines of a command or diff shown; more would push the rest out of view


@dataclass(frozen=True)
class Limits:
    """How much of each part is shown (the prompt shrinks step by step to fit its byte budget)."""

    title: int
    label: int
    command: int
    diff: int
    items: int
    lines: int = MAX_LINES


STEPS = (
    Limits(title=1000, label=MAX_LABEL, command=MAX_COMMAND, diff=MAX_DIFF, items=MAX_ITEMS),
    Limits(title=1000, label=MAX_LABEL, command=1000, diff=2000, items=MAX_ITEMS, lines=40),
    Limits(title=500, label=MAX_LABEL, command=500, diff=800, items=3, lines=20),
    Limits(title=200, label=100, command=200, diff=300, items=2, lines=10),
    Limits(title=100, label=40, command=100, diff=100, items=1, lines=5),
)


@dataclass(frozen=True)
class DiffSummary:
    """One changed file: its path (shown form) and the lines added and removed."""

    path: str
    added: int
    removed: int
    new_file: bool


@dataclass
class Preview:
    """The preview items, whether nothing was cut, and the summary the prose body gives of each diff."""

    items: list[dict[str, str]] = field(default_factory=list)
    complete: bool = True
    diffs: list[DiffSummary] = field(default_factory=list)


def diff_text(item: Mapping[str, Any]) -> tuple[str, str, DiffSummary] | None:
    """(path, unified diff, summary) of an ACP ``diff`` content block, or None when it is not one."""
    path, old, new = item.get("path"), item.get("oldText"), item.get("newText")
    if not isinstance(path, str) or not isinstance(new, str) or not (old is None or isinstance(old, str)):
        return None
    lines = difflib.unified_diff(old.splitlines() if old else [], new.splitlines(),
                                 fromfile=path if old is not None else "/dev/null", tofile=path, lineterm="")
    text = "\n".join(lines)
    # After the "--- a" / "+++ b" header, a line is added (+), removed (-), context ( ) or a hunk (@@).
    added, removed = max(text.count("\n+") - 1, 0), text.count("\n-")
    return path, text or "(no changes)", DiffSummary(prose(path, 1000), added, removed, old is None)


def content_text(item: Mapping[str, Any]) -> str | None:
    """The text of an ACP ``content`` block holding text, or None."""
    inner = item.get("content")
    if isinstance(inner, Mapping) and inner.get("type") == "text" and isinstance(inner.get("text"), str):
        text: str = inner["text"]
        return text or None
    return None


def location_text(loc: object) -> str | None:
    if not isinstance(loc, Mapping) or not isinstance(loc.get("path"), str) or not loc["path"]:
        return None
    line = loc.get("line")
    path: str = loc["path"]
    return f"{path}:{line}" if isinstance(line, int) and not isinstance(line, bool) else path


@dataclass(frozen=True)
class Facts:
    """What the request says, read once (the prompt may be built at several cuts)."""

    shown: Shown  # what of the raw input is shown (bot.prompts.shown)
    diffs: list[tuple[str, str, DiffSummary]]  # the first MAX_ITEMS: (path, unified diff, summary)
    texts: list[str]
    places: list[str]
    more: bool  # more diffs, texts or places than MAX_ITEMS


def _first(values: Iterable[T | None], n: int) -> tuple[list[T], bool]:
    """The first ``n`` values that are not None, and whether there were more."""
    kept = list(islice((v for v in values if v is not None), n + 1))
    return kept[:n], len(kept) > n


def gather(
    *, raw_input: object, tool_kind: str | None, title: str, locations: Sequence[object], content: Sequence[object]
) -> Facts:
    """Read the request's command, diffs, texts and places (at most MAX_ITEMS of each)."""
    blocks = [b for b in content if isinstance(b, Mapping)]
    diffs, more_diffs = _first((diff_text(b) for b in blocks if b.get("type") == "diff"), MAX_ITEMS)
    texts, more_texts = _first((content_text(b) for b in blocks if b.get("type") == "content"), MAX_ITEMS)
    places, more_places = _first((location_text(loc) for loc in locations), MAX_ITEMS)
    by_diff = {str(b.get(k)) for b in blocks if b.get("type") == "diff" for k in ("path", "oldText", "newText")}
    if by_diff and any(b.get("type") == "diff" and not b.get("oldText") for b in blocks):
        by_diff.add("")  # an empty old text: the diff shows a new file
    shown = shown_input(raw_input, kind=tool_kind, title=title, by_diff=frozenset(by_diff - {"None"}))
    return Facts(shown, diffs, texts, places, more_diffs or more_texts or more_places)


def build_preview(
    *, agent: str, cwd: str = "", tool: str, tool_kind: str | None, facts: Facts, limits: Limits
) -> Preview:
    """The preview of one request at the given cuts. Every text is made visible before it is cut."""
    out = Preview(complete=not facts.more)

    def field_item(label: str, value: str, limit: int, code: bool = False) -> None:
        shown, was_cut = code_line(value, limit) if code else prose_cut(value, limit)
        out.complete = out.complete and not was_cut
        out.items.append({"type": "field", "label": label, "value": shown})

    def text_item(label: str, text: str, limit: int) -> None:
        shown, was_cut = code_text(text, limit, limits.lines)
        out.complete = out.complete and not was_cut
        out.items.append({"type": "text", "label": cut(label, limits.label)[0], "text": shown})

    shown = facts.shown
    if agent:
        field_item("Agent", agent, limits.title)
    if shown.cwd is not None:  # where it runs: the raw input's, and the session's beside it when it differs
        field_item("Directory", shown.cwd, limits.title, code=True)
        if cwd and cwd != shown.cwd:
            field_item("Session directory", cwd, limits.title)
    elif cwd:
        field_item("Directory", cwd, limits.title)
    if tool:
        field_item("Tool", tool, limits.title)
    if tool_kind:
        field_item("Kind", tool_kind, limits.label)
    if shown.escalates:
        field_item(OUTSIDE, ", ".join(shown.escalates), limits.title)
    if shown.label is not None:
        text_item(shown.label, shown.text, limits.command)
    if shown.settings:
        text_item("Settings", "\n".join(shown.settings), limits.command)
    for path, diff, summary in facts.diffs[: limits.items]:
        text_item(f"Diff: {prose(path, limits.label)}", diff, limits.diff)
        out.diffs.append(replace(summary, path=cut(summary.path, limits.title)[0]))
    for text in facts.texts[: limits.items]:
        text_item("Details", text, limits.command)
    for place in facts.places[: limits.items]:
        field_item("Location", place, limits.title)
    if max(len(facts.diffs), len(facts.texts), len(facts.places)) > limits.items:
        out.complete = False
    return out
