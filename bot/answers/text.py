"""Reading a typed answer: the whole text is the answer, or it is conversation. Pure.

An answer is a choice, optionally followed by feedback after an explicit separator:

- the choice is a number (``2``, `` 2. ``, ``#2``, ``2)``) naming an option in the body's order, or
  an option's label or id (NFKC, case and spacing ignored), with an optional trailing ``.``;
- the separator is ``-``, ``–``, ``—`` or ``:`` followed by whitespace or the end, or a line break.

Anything else is conversation: ``1 sec, let me check``, ``allow me to look first``, ``3:30``, ``2.5``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

KEYCAPS: tuple[str, ...] = (*(f"{n}\ufe0f\u20e3" for n in range(1, 10)), "\U0001f51f")
"""Keycap reactions 1️⃣ … 9️⃣, 🔟 as clients send them; ``KEYCAPS[i]`` picks option ``i + 1``."""

_KEYCAP_INDEX = {**{f"{n}\u20e3": n for n in range(1, 10)}, "\U0001f51f": 10}

# Where the choice may end and feedback begin: a dash or colon with whitespace after it, or a line break.
_SEPARATOR = re.compile("(?<![ \t])[ \t]*(?:[-\u2013\u2014:](?=\\s|$)|\r?\n)")
_NUMBER = re.compile("#?([0-9]+)[.)]?", re.ASCII)
_MAX_DIGITS = 6  # int() of very long digit strings raises in 3.11; no prompt has that many options


@dataclass(frozen=True)
class Pick:
    """The option at ``index`` (0-based) with optional feedback."""

    index: int
    feedback: str | None


@dataclass(frozen=True)
class NoSuchNumber:
    """A well-formed number that names no option."""

    number: int


def keycap_index(key: str) -> int | None:
    """1–10 for a keycap reaction (with or without U+FE0F), else ``None``."""
    if not isinstance(key, str):
        return None
    return _KEYCAP_INDEX.get(key.replace("\ufe0f", "").replace("\ufe0e", ""))


def norm(text: str) -> str:
    """Compare key: NFKC, Unicode casefold, whitespace collapsed and trimmed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _splits(text: str, longest: int) -> Iterator[tuple[str, str | None]]:
    """(choice, feedback) candidates, the longest choice first: the whole text, then at each separator.

    Choices longer than ``longest`` characters name nothing and are skipped before they are cut.
    """
    if len(text) <= longest:
        yield text, None
    cuts = []
    for m in _SEPARATOR.finditer(text):
        if m.start() > longest:
            break
        if m.start() > 0:
            cuts.append(m)
    for m in reversed(cuts):
        yield text[: m.start()], text[m.end() :].strip() or None


def _number(choice: str) -> int | None:
    m = _NUMBER.fullmatch(choice.strip())
    if m is None:
        return None
    digits = m.group(1).lstrip("0") or "0"
    return int(digits) if len(digits) <= _MAX_DIGITS else 10**_MAX_DIGITS


def _names(options: Sequence[tuple[str, str]], aliases: Mapping[str, int]) -> dict[str, list[tuple[int, int]]]:
    """norm(name) -> [(rank: 0 label or alias / 1 id, index)]."""
    keys: dict[str, list[tuple[int, int]]] = {}
    for index, option in enumerate(options):
        for rank, raw in ((0, option[1]), (1, option[0])):
            key = norm(raw) if isinstance(raw, str) else ""
            if key:
                keys.setdefault(key, []).append((rank, index))
    for alias, index in aliases.items():
        keys.setdefault(norm(alias), []).append((0, index))
    return keys


def _named(choice: str, keys: dict[str, list[tuple[int, int]]]) -> int | None:
    key = norm(choice)
    hits = keys.get(key) or (keys.get(key[:-1].rstrip()) if key.endswith(".") else None)
    if not hits:
        return None
    top = min(rank for rank, _ in hits)
    chosen = {index for rank, index in hits if rank == top}
    return chosen.pop() if len(chosen) == 1 else None  # two options share this name: not an answer


def parse(
    text: str, options: Sequence[tuple[str, str]], aliases: Mapping[str, int] | None = None
) -> Pick | NoSuchNumber | None:
    """Read ``text`` as a whole answer to a prompt offering ``options`` ((id, label), numbered from 1).

    ``aliases`` are more names for an option (by index), as strong as a label: a label equal to an
    alias makes the name name nothing.

    A number wins over a label that happens to be a number; a label over an id; the longest
    choice over a shorter one (so an option named ``Allow - once`` is not read as ``Allow``).
    """
    text = text.strip() if isinstance(text, str) else ""
    if not text:
        return None
    keys = _names(options, aliases or {})
    longest = 4 * max((len(k) for k in keys), default=0) + 64  # no choice is longer: skip long heads fast
    for choice, feedback in _splits(text, longest):
        number = _number(choice)
        if number is not None:
            return Pick(number - 1, feedback) if 1 <= number <= len(options) else NoSuchNumber(number)
        index = _named(choice, keys)
        if index is not None:
            return Pick(index, feedback)
    return None
