"""Agent-given text made fit to show. Pure.

The model behind the agent is untrusted, so its text is shown as text: valid Unicode, invisible
characters (bidi controls, zero-width and other format characters) written out as ``<U+202E>``,
runs of blank lines collapsed, and in prose nothing that a client would turn into a mention or a
pill. Layout (who starts a line) is the caller's job: agent text never starts a line of the body.
"""

from __future__ import annotations

import html
import re
import unicodedata

from bot.util.words import clip

_SURROGATE = re.compile("[\ud800-\udfff]")
# Invisible or layout-changing: format (Cf: bidi controls, zero-width, tags), controls (Cc) but tab and
# line feed, line/paragraph separators, and the blank "letters" that render as nothing.
_INVISIBLE_CATEGORIES = frozenset({"Cf", "Cc", "Zl", "Zp"})
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
_KEEP = frozenset("\n\t")
# Whatever a client turns into a mention or a pill: @room, user ids, room aliases and ids.
_MENTION = re.compile(
    r"(?<![\w.+-])(?:@room\b|[@#!](?=[^\s:@#!<>\"']+:[A-Za-z0-9\[]))", re.IGNORECASE
)
_LOOKALIKE = {"@": "\uff20", "#": "\uff03", "!": "\uff01"}  # ＠ ＃ ！: read the same, never a mention
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")
_BLANK_RUN = re.compile(r"\n(?:[^\S\n]*\n)+")
_LONG_BLANK = re.compile(r"[^\S\n]{9,}(?=\S)")  # more than 8 blanks with more text after them on the line
MAX_INDENT = 64  # blanks that start a line (after a diff's +/-) are indentation up to this many


def valid(text: str) -> str:
    """Text safe to send: surrogate pairs joined, lone surrogates replaced by U+FFFD."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _invisible(ch: str) -> bool:
    return ch not in _KEEP and (unicodedata.category(ch) in _INVISIBLE_CATEGORIES or ch in _BLANK_LETTERS)


def visible(text: str) -> str:
    """``text`` with every invisible character written out (``<U+202E>``); CR LF and CR become LF."""
    text = valid(text).replace("\r\n", "\n").replace("\r", "\n")
    if text.replace("\n", "").replace("\t", "").isprintable():  # the common case, at C speed
        return text
    return "".join(f"<U+{ord(ch):04X}>" if _invisible(ch) else ch for ch in text)


def cut(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to at most ``limit`` characters (ending in "…" when cut), and whether it was cut."""
    return clip(text, limit), len(text) > limit


def cut_lines(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to at most ``limit`` lines (the last one "…"), and whether it was cut."""
    lines = text.split("\n")
    if len(lines) <= limit:
        return text, False
    return "\n".join([*lines[: max(limit - 1, 0)], "…"]), True


def one_line(text: str) -> str:
    """Whitespace runs (line breaks too) collapsed to one space, trimmed."""
    return " ".join(text.split())


def esc(text: str) -> str:
    """HTML-escaped text (quotes left alone: never inside an attribute)."""
    return html.escape(text, quote=False)


def defang(text: str) -> str:
    """Mentions and pills written with look-alike characters (＠room), so that no client pings or pills."""
    return _MENTION.sub(lambda m: _LOOKALIKE[m.group(0)[0]] + m.group(0)[1:], text)


def prose_cut(text: str, limit: int) -> tuple[str, bool]:
    """One line of agent prose (see :func:`prose`) of at most ``limit`` characters, and whether it was cut.

    Only what can be shown is examined, so a huge text costs no more than a short one.
    """
    flat = one_line(valid(text))[: limit + 1]
    return cut(defang(one_line(visible(flat))), limit)


def prose(text: str, limit: int | None = None) -> str:
    """One line of agent prose: visible, on one line, with no mention a client would ping or pill;
    with ``limit``, at most that many characters ("…" when cut)."""
    if limit is not None:
        return prose_cut(text, limit)[0]
    return defang(one_line(visible(text)))


def blanks(text: str) -> tuple[str, bool]:
    """``text`` with every long run of blanks that has text after it on its line written as ``␠×1900``
    (it would push that text out of view), and whether there was one. Indentation (blanks that start a
    line, or follow a diff's ``+``/``-``/`` ``) may be up to :data:`MAX_INDENT` long."""
    found = False

    def one(m: re.Match[str]) -> str:
        nonlocal found
        start = text.rfind("\n", 0, m.start()) + 1
        if m.start() - start <= 1 and text[start : m.start()] in ("", "+", "-", " ") and len(m.group(0)) <= MAX_INDENT:
            return m.group(0)
        found = True
        run = m.group(0)
        return f"␠×{len(run)}" if run.strip(" ") == "" else f"<blank×{len(run)}>"

    out = _LONG_BLANK.sub(one, text)
    return out, found


def code_shown(text: str, limit: int, max_lines: int) -> tuple[str, bool, bool]:
    """Agent code (a command, a diff) as shown: exact but for blank-line runs collapsed to one, long runs
    of blanks counted (``␠×1900``) and invisible characters written out (``<U+001B>``); at most ``limit``
    characters and ``max_lines`` lines. Returns the text, whether it was cut, and whether anything was
    written out. Only what is shown is examined."""
    flat = _BLANK_RUN.sub("\n\n", valid(text).replace("\r\n", "\n").replace("\r", "\n")).strip("\n")
    flat, by_lines = cut_lines(flat, max_lines)
    flat, by_blanks = blanks(flat)
    flat, by_size = cut(flat, limit)
    shown = visible(flat)
    hidden = shown != flat
    shown, by_width = cut(shown, limit)
    return shown, by_lines or by_size or by_width, by_blanks or hidden


def code_text(text: str, limit: int, max_lines: int) -> tuple[str, bool]:
    """:func:`code_shown`'s text, and whether it is not all there as sent: cut, or a run of blanks or an
    invisible character written out (either could hide what runs from a reader)."""
    shown, was_cut, written_out = code_shown(text, limit, max_lines)
    return shown, was_cut or written_out


def code_line(text: str, limit: int) -> tuple[str, bool]:
    """One line of agent code shown in prose (a directory): :func:`code_text` of its first line, no mention."""
    shown, was_cut = code_text(text, limit, 1)
    return defang(shown), was_cut or "\n" in text or "\r" in text


def title_html(title: str) -> str:
    """A title as HTML: Markdown inline code (`` `x` ``) becomes ``<code>``; nothing else is interpreted."""
    out: list[str] = []
    at = 0
    for m in _CODE_SPAN.finditer(title):
        inner = m.group(2)
        if inner.strip():
            out += [esc(title[at : m.start()]), f"<code>{esc(inner.strip())}</code>"]
            at = m.end()
    out.append(esc(title[at:]))
    return "".join(out)


def unquote_code(title: str) -> str:
    """A title that is one inline code span (`` `touch x` ``) without its backticks, else the title."""
    m = _CODE_SPAN.fullmatch(title.strip())
    return m.group(2).strip() if m else title
