"""Agent Markdown (a plan) -> HTML a Matrix client shows. Pure; CommonMark by markdown-it-py, raw HTML off.

This project's rules are a few render hooks: every character of the agent's text is HTML-escaped (raw HTML
shows as text), a link shows as its text and its address in brackets (no ``<a>``: no hidden target), an image
as its description and address (no ``<img>``: nothing is fetched), mentions are defanged, and only plain
formatting tags are written (no attributes but an ordered list's ``start`` and a code block's
``language-*`` class). Headings are shown two levels down (``#`` is ``<h3>``), so a plan never outshouts the
bot's own lines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

from bot.prompts.text import defang, esc

_LANG = re.compile(r"[\w+.-]{1,40}")


class _Renderer(RendererHTML):
    """markdown-it's HTML renderer with the project's rules; blocks are not separated by line breaks."""

    def renderToken(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        token = tokens[idx]
        if token.type in ("heading_open", "heading_close"):
            level = min(6, int(token.tag[1]) + 2)
            return f"<{'/' if token.nesting < 0 else ''}h{level}>"
        if token.type == "ordered_list_open":
            start = token.attrGet("start")
            return f'<ol start="{int(start)}">' if start is not None and int(start) != 1 else "<ol>"
        if token.nesting >= 0 and token.attrs:
            return f"<{token.tag}>"  # no attribute an agent could set
        return super().renderToken(tokens, idx, options, env).strip("\n")

    def text(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        return esc(defang(tokens[idx].content))

    def code_inline(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        return f"<code>{esc(tokens[idx].content)}</code>"

    def fence(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        token = tokens[idx]
        lang = _LANG.fullmatch(token.info.split()[0]) if token.info.split() else None
        cls = f' class="language-{lang.group(0)}"' if lang else ""
        return f"<pre><code{cls}>{esc(token.content.rstrip(chr(10)))}</code></pre>"

    code_block = fence  # an indented block: a fence with no info string

    def link_open(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        return ""

    def link_close(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        opening = next(t for t in reversed(tokens[:idx]) if t.type == "link_open")
        if opening.markup == "autolink":
            return ""  # its text is its address
        text_shown = any(t.type != "link_open" for t in tokens[tokens.index(opening) + 1 : idx])
        href = esc(defang(str(opening.attrGet("href") or "")))
        return f" ({href})" if text_shown else f"({href})"

    def image(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        token = tokens[idx]
        alt = esc(defang(self.renderInlineAsText(token.children or [], options, env)))
        src = esc(defang(str(token.attrGet("src") or "")))
        return f"{alt} ({src})" if alt else f"({src})"

    def softbreak(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        return "<br>"

    hardbreak = softbreak

    def html_block(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        return esc(tokens[idx].content)  # never reached with html off; text all the same

    html_inline = html_block


_OPTIONS = {"html": False, "linkify": False, "typographer": False, "xhtmlOut": False}
_MD: Any = MarkdownIt("commonmark", _OPTIONS, renderer_cls=_Renderer)


def render(text: str) -> str:
    """The HTML of ``text`` (Markdown, as a plan is written)."""
    return str(_MD.render(text))
