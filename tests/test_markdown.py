"""A plan's Markdown: CommonMark (markdown-it-py), with this project's rules as render hooks."""

from __future__ import annotations

import re

import pytest

from bot.prompts.markdown import render

_TAG = re.compile(r"<(/?)([a-z0-9]+)([^>]*)>")
_ALLOWED = {"p", "br", "h3", "h4", "h5", "h6", "strong", "em", "code", "pre", "ul", "ol", "li", "blockquote", "hr"}


def _tags(html: str) -> list[tuple[str, str]]:
    return [(m.group(2), m.group(3)) for m in _TAG.finditer(html)]


@pytest.mark.parametrize(
    ("text", "html"),
    [
        ("**bold *it* x**", "<p><strong>bold <em>it</em> x</strong></p>"),
        (r"\*x\*", "<p>*x*</p>"),
        ("1) a\n2) b\n\n10. c\n11. d", '<ol><li>a</li><li>b</li></ol><ol start="10"><li>c</li><li>d</li></ol>'),
        ("# Top\n###### Deep", "<h3>Top</h3><h6>Deep</h6>"),
        ("line one\nline two", "<p>line one<br>line two</p>"),
        ("```sh\nrm <x>\n```", '<pre><code class="language-sh">rm &lt;x&gt;</code></pre>'),
        ('```"><img src=x>\ny\n```', "<pre><code>y</code></pre>"),
        ("    indented\n    code", "<pre><code>indented\ncode</code></pre>"),
        ("> quoted", "<blockquote><p>quoted</p></blockquote>"),
        ("---", "<hr>"),
    ],
)
def test_commonmark_as_written(text: str, html: str) -> None:
    assert render(text) == html


def test_links_and_images_are_text_with_their_targets() -> None:
    html = render("[good.example](https://evil.example/x) ![a diagram](https://img.example/p.png) <https://auto.example>")
    assert html == (
        "<p>good.example (https://evil.example/x) a diagram (https://img.example/p.png) https://auto.example</p>"
    )


def test_raw_html_is_text() -> None:
    html = render('<img src="https://track.example/p.png">\n\nhi <a href="https://x">y</a> <script>z</script>')
    assert "<img" not in html and "<a " not in html and "<script" not in html
    assert "&lt;img src=\"https://track.example/p.png\"&gt;" in html


def test_mentions_are_defanged_everywhere() -> None:
    html = render("@room look\n\n# @room\n\n- @bob:example.org\n\n[@room](https://x/@room:example.org)")
    assert "@room" not in html and "@bob:example.org" not in html
    assert "＠room" in html and "＠bob:example.org" in html


@pytest.mark.parametrize(
    "text",
    [
        "[x](javascript:alert(1)) ![y](data:image/png;base64,AAAA) [z](https://e.example \"title\")",
        "*" * 500 + "x" + "*" * 500,
        "> " * 200 + "deep",
        "- " * 200 + "deep",
        "<div onclick=x>\n\n</div>",
        "| a | b |\n|---|---|\n| 1 | 2 |",
        '```js" onmouseover="x\ncode\n```',
    ],
)
def test_only_plain_tags_without_attributes(text: str) -> None:
    for tag, attrs in _tags(render(text)):
        assert tag in _ALLOWED, tag
        assert attrs in ("", ' class="language-js"') or re.fullmatch(r' start="\d+"', attrs), attrs
