"""Could a reader take a message for a permission prompt? Pure: :func:`looks_like_prompt` (text, html -> bool).

Only the bot's own events are prompts, but a reader sees a message, not its sender's id (a display name and
avatar are free to copy). So a message from anyone else between a prompt and a plain answer that looks like
a prompt breaks the binding (:mod:`bot.answers.timeline`): the bot asks which, and settles nothing.

What is judged is what a reader sees, normalised (:func:`normalise`): NFKC; line breaks of every kind as
``\\n``; invisible characters gone (format controls: zero-width, bidi, soft hyphen, tags; combining marks and
variation selectors, after NFD; blank fillers; unassigned and private-use code points); case folded; and every
other letter that looks like an ASCII one folded to it (Unicode TR39 confusables, from the
``confusable_homoglyphs`` data). The HTML is reduced to its text as a client shows it (:func:`html_text`: tags
gone, blocks and ``<br>`` on their own lines, ordered list items with their numbers). Body and HTML are judged
apart, and either looking like a prompt counts.

The rule is deliberately wider than "a copy of our prompt", so that no spelling trick can pass for one that a
reader would still take for a prompt. A message looks like a prompt when either text, normalised, has

0. a bidi control or mark: the order a reader sees is then not the order of the text, so nothing below
   could be judged on what a reader sees; or
1. two or more non-blank lines: every prompt is a block (banner, fields, options, hint); or
2. an option-like line: it begins with a number (any script's digits, or a letter that reads as one) followed
   by ``.``, ``)``, ``:``, ``]`` or a dash, the form of a prompt's options; or a keycap or a number drawn as
   one character (①, ❶, ⒈, ²) anywhere; or
3. a prompt or choice word: permission, permit, allow, approve, accept, reject, deny, decline, found with
   every space, punctuation mark and tag between its letters removed and the ASCII look-alikes folded
   (``rn`` for ``m``, ``1``/``l`` for ``i``, ``0`` for ``o``).

Why that is safe: a fake prompt must show a reader a request and choices a plain ``1`` or an option name could
answer. Choices come as option lines (rule 2), as a list (rule 1; an HTML list is lines, its items numbered),
or in prose that names them with these words (rule 3). A false positive only makes the bot ask which (a reply
to the prompt always works). Not caught: a one-line question naming its choices in other words ("run ls?
yes/no"), and right-to-left letters reordering Latin ones without a bidi control; a plain answer under such
a line still goes to the one pending prompt (a reply is the unambiguous way).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from html.parser import HTMLParser

_DROPPED = frozenset({"Cf", "Cc", "Mn", "Me", "Co", "Cn", "Cs"})  # spacing marks (Mc) show: folded, not dropped
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")  # Hangul fillers: letters that show nothing
_AS_SPACE = frozenset("\t\u2800")  # tab, braille blank
_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")  # what str.splitlines breaks at
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_KEYCAP = "\u20e3"  # the keycap of 1️⃣: a number shown as an option marker

_OPTION_LINE = re.compile(r"[\s>*_~`•·\-–—(\[#]*(?:\d{1,3}|[ilo|])\s*[.):\]\-–—]")
_WORDS = ("permission", "permit", "allow", "approve", "accept", "reject", "deny", "decline")
_ASCII_PAIRS = (("rn", "m"), ("vv", "w"), ("ci", "d"))  # after _ASCII_ONES: "cl" reads as "d"
_ASCII_ONES = str.maketrans({"1": "i", "l": "i", "0": "o"})


def _bare(text: str) -> str:
    """``text`` without its marks (combining, bidi): how a glyph in the data reads."""
    return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) not in _DROPPED)


@functools.cache
def _fold_table() -> dict[str, str]:
    """Non-ASCII character -> the ASCII text it looks like (TR39 confusables data, followed through
    non-ASCII look-alikes such as ``κ`` -> ``ĸ`` -> ``k``), where there is one."""
    from confusable_homoglyphs import confusables  # type: ignore[import-untyped]  # data: 40 ms, loaded once

    data: dict[str, list[dict[str, str]]] = confusables.confusables_data

    def ascii_of(char: str, depth: int) -> str | None:
        glyphs = [_bare(str(g.get("c", ""))) for g in data.get(char, [])]
        for glyph in glyphs:
            if glyph and glyph.isascii():
                return glyph
        for glyph in glyphs if depth else []:
            if len(glyph) == 1 and glyph != char:
                found = ascii_of(glyph, depth - 1)
                if found:
                    return found
        return None

    table = {char: found for char in data if not char.isascii() and (found := ascii_of(char, 2))}
    for char, glyphs in data.items():  # an ASCII prototype lists what looks like it
        if char.isascii() and len(char) == 1:
            for glyph in (_bare(str(g.get("c", ""))) for g in glyphs):
                if len(glyph) == 1 and not glyph.isascii():
                    table.setdefault(glyph, char)
    return table


def _fold(text: str) -> str:
    """Invisible characters dropped, look-alikes folded to ASCII (``text`` in NFD)."""
    table, out = _fold_table(), []
    for ch in text:
        if ch in _BREAKS:
            out.append("\n")
        elif ch in _AS_SPACE:
            out.append(" ")
        elif ch in _BLANK_LETTERS or unicodedata.category(ch) in _DROPPED:
            continue
        elif ch not in table and unicodedata.category(ch) == "No" and unicodedata.numeric(ch, 0.5).is_integer():
            out.append(f"{int(unicodedata.numeric(ch))}.")  # ① ❶ ⑩ ²: a number shown as an option marker
        else:
            out.append(ch if ch.isascii() else table.get(ch, ch))
    return "".join(out)


def normalise(text: str) -> str:
    """What a reader sees, in one spelling (see the module docstring); lines kept as ``\\n``. Look-alikes are
    folded before NFKC, and before and after case folding (the data knows ``Ε`` as ``E``, and ``ε`` as nothing)."""
    raw = _fold(unicodedata.normalize("NFD", text.replace(_KEYCAP, ".")))  # before NFKC: it turns ϲ into ς
    once = _fold(unicodedata.normalize("NFD", unicodedata.normalize("NFKC", raw))).casefold()
    return _fold(unicodedata.normalize("NFD", once)).casefold()


def _key(text: str) -> str:
    """Letters and digits only, ASCII look-alikes folded: what a word reads as, however it is split."""
    key = "".join(ch for ch in text.replace("|", "l") if ch.isalnum()).translate(_ASCII_ONES)
    for pair, one in _ASCII_PAIRS:
        key = key.replace(pair, one)
    return key


_WORD_KEYS = tuple(_key(w) for w in _WORDS)


class _Text(HTMLParser):
    """The text a client shows for some HTML: tags dropped, blocks on lines, ordered items numbered."""

    BLOCKS = frozenset({"p", "div", "br", "li", "tr", "pre", "blockquote", "ol", "ul", "table", "hr",
                        "h1", "h2", "h3", "h4", "h5", "h6", "details", "summary", "dt", "dd"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.lists: list[list[int]] = []  # per open list: [next number] (ordered) or [] (bulleted)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.BLOCKS:
            self.parts.append("\n")
        if tag == "ol":
            start = dict(attrs).get("start") or "1"
            self.lists.append([int(start) if start.isascii() and start.isdigit() and len(start) < 7 else 1])
        elif tag == "ul":
            self.lists.append([])
        elif tag == "li" and self.lists and self.lists[-1]:
            self.parts.append(f"{self.lists[-1][0]}. ")
            self.lists[-1][0] += 1
        elif tag == "img":  # a client shows its alt text when it shows no image
            self.parts.append(" ".join(v for k, v in attrs if k in ("alt", "title") and v))

    def handle_endtag(self, tag: str) -> None:
        if tag in self.BLOCKS:
            self.parts.append("\n")
        if tag in ("ol", "ul") and self.lists:
            self.lists.pop()

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def html_text(html: str) -> str:
    """The text of ``html`` as a client shows it (not normalised)."""
    parser = _Text()
    parser.feed(html)
    parser.close()
    return "".join(parser.parts)


def _marker(ch: str) -> bool:
    """A keycap, or a number drawn as one character (① ❶ ⑩ ⒈): how options are marked, anywhere in a line."""
    return ch == _KEYCAP or (unicodedata.category(ch) == "No" and unicodedata.numeric(ch, 0.5).is_integer())


def _prompt_like(text: str) -> bool:
    if not _BIDI.isdisjoint(text) or any(_marker(ch) for ch in text):
        return True
    lines = [line for line in normalise(text).split("\n") if line.strip()]
    if len(lines) >= 2 or any(_OPTION_LINE.match(line) for line in lines):
        return True
    key = _key("".join(lines))
    return any(word in key for word in _WORD_KEYS)


def looks_like_prompt(text: str | None, html: str | None) -> bool:
    """Could a reader take a message with this ``body`` (``text``) and ``formatted_body`` (``html``) for a
    prompt? Either one looking like a prompt counts. Never raises; HTML it cannot read counts as a prompt."""
    if text and _prompt_like(text):
        return True
    if not html:
        return False
    try:
        shown = html_text(html)
    except Exception:  # html.parser is lenient; anything it cannot read fails closed
        return True
    return _prompt_like(shown)
