"""Agent Markdown (a plan) -> HTML a Matrix client shows. Pure, small and strict.

What a plan uses is rendered: ATX headings, paragraphs, bullet and numbered lists (nested by indentation),
fenced and indented code blocks, block quotes, rules, and inline code, bold and italics. Nothing else is
interpreted: every character of the agent's text is HTML-escaped (raw HTML shows as text), a link shows as its
text and its address in brackets (no ``<a>``: no hidden target), images likewise. Headings are shown two levels
down (``#`` is ``<h3>``), so a plan never outshouts the bot's own lines.
"""

from __future__ import annotations

import re

from bot.prompts.text import esc

_HEADING = re.compile(r"(#{1,6})[ \t]+(.*?)[ \t#]*$")
_FENCE = re.compile(r"(`{3,}|~{3,})[ \t]*([\w+.-]*)")
_ITEM = re.compile(r"([ \t]*)([-*+]|[0-9]{1,9}[.)])[ \t]+(.*)")
_RULE = re.compile(r"[ \t]{0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_INLINE = re.compile(
    r"(?P<code>(?<!`)(?P<code_ticks>`+)(?!`)(?P<ctext>.+?)(?<!`)(?P=code_ticks)(?!`))"
    r"|!?\[(?P<ltext>[^\]\n]{0,500})\]\((?P<url>[^)\s]{1,2000})\)"
    r"|\*\*(?P<b1>[^*\n]+?)\*\*|__(?P<b2>[^_\n]+?)__"
    r"|(?<![\w*])\*(?P<i1>[^*\n]+?)\*(?![\w*])|(?<![\w_])_(?P<i2>[^_\n]+?)_(?![\w_])"
)


def inline(text: str) -> str:
    """One paragraph's text: escaped, with inline code, bold, italics and links (as text) rendered."""
    out: list[str] = []
    at = 0
    for m in _INLINE.finditer(text):
        out.append(esc(text[at : m.start()]))
        at = m.end()
        if m.group("code"):
            out.append(f"<code>{esc(m.group('ctext').strip())}</code>")
        elif m.group("url") is not None:
            shown = m.group("ltext") or ""
            out.append(f"{inline(shown)} ({esc(m.group('url'))})" if shown else f"({esc(m.group('url'))})")
        elif m.group("b1") or m.group("b2"):
            out.append(f"<strong>{inline(m.group('b1') or m.group('b2'))}</strong>")
        else:
            out.append(f"<em>{inline(m.group('i1') or m.group('i2'))}</em>")
    out.append(esc(text[at:]))
    return "".join(out)


def _indent(line: str) -> int:
    return len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip(" "))


def render(text: str) -> str:
    """The HTML of ``text`` (Markdown, as a plan is written)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    html: list[str] = []
    para: list[str] = []
    lists: list[tuple[int, str]] = []  # open lists: (indent, "ul" | "ol")
    i = 0

    def flush() -> None:
        if para:
            html.append(f"<p>{'<br>'.join(inline(p.strip()) for p in para)}</p>")
            para.clear()

    def close_lists(indent: int = -1) -> None:
        while lists and lists[-1][0] > indent:
            html.append(f"</li></{lists.pop()[1]}>")

    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        fence = _FENCE.match(stripped)
        item = _ITEM.match(line)
        if fence:
            flush()
            close_lists()
            mark, lang = fence.group(1), fence.group(2)
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(mark):
                body.append(lines[i])
                i += 1
            cls = f' class="language-{esc(lang)}"' if lang else ""
            html.append(f"<pre><code{cls}>{esc(chr(10).join(body))}</code></pre>")
        elif not stripped:
            flush()
            if not (lists and i + 1 < len(lines) and (_ITEM.match(lines[i + 1]) or _indent(lines[i + 1]) > 0)):
                close_lists()
        elif item:
            flush()
            indent, tag = _indent(item.group(1)), "ol" if item.group(2)[0].isdigit() else "ul"
            close_lists(indent)
            if lists and lists[-1][0] == indent and lists[-1][1] == tag:
                html.append("</li><li>")
            else:
                if lists and lists[-1][0] == indent:
                    html.append(f"</li></{lists.pop()[1]}>")
                start = int(item.group(2)[:-1]) if tag == "ol" else 1
                attr = f' start="{start}"' if tag == "ol" and start != 1 else ""
                html.append(f"<{tag}{attr}><li>")
                lists.append((indent, tag))
            html.append(inline(item.group(3).strip()))
        elif lists and _indent(line) > lists[-1][0]:
            html.append("<br>" + inline(stripped))  # a list item's continuation line
        elif (heading := _HEADING.match(stripped)) is not None:
            flush()
            close_lists()
            level = min(6, len(heading.group(1)) + 2)
            html.append(f"<h{level}>{inline(heading.group(2))}</h{level}>")
        elif _RULE.match(line):
            flush()
            close_lists()
            html.append("<hr>")
        elif stripped.startswith(">"):
            flush()
            close_lists()
            quoted: list[str] = []
            while i < len(lines) and lines[i].strip().startswith(">"):
                quoted.append(lines[i].strip()[1:].removeprefix(" "))
                i += 1
            html.append(f"<blockquote>{render(chr(10).join(quoted))}</blockquote>")
            continue
        elif _indent(line) >= 4 and not para:
            close_lists()
            body = []
            while i < len(lines) and (_indent(lines[i]) >= 4 or not lines[i].strip()):
                body.append(lines[i].expandtabs(4)[4:])
                i += 1
            html.append(f"<pre><code>{esc(chr(10).join(body).rstrip(chr(10)))}</code></pre>")
            continue
        else:
            close_lists()
            para.append(stripped)
        i += 1
    flush()
    close_lists()
    return "".join(html)
