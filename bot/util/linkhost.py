"""The host a person will open from a link: read as a browser reads it, or refused. Pure.

One reading decides: the WHATWG URL standard's, by ``ada-url`` (the parser Node's ``URL`` is), the way a
browser, a client that linkifies the link and a fetcher built on Node read it. A link whose host another
common reading (Python's ``urllib``, a person's eye) could take for another one is refused
(:class:`BadLink`, saying why): a ``\\`` (WHATWG reads it as ``/`` in an http(s) link), user-info before an
``@`` (the browser opens what follows it), a control, blank or invisible character (WHATWG drops tabs and
line breaks, IDNA drops zero-width ones), a ``%`` in the host (WHATWG decodes it), a number WHATWG reads as
another IPv4 address (``0x7f.1``), no ``//`` after the scheme. A host written with non-ASCII letters
(``аpple.com`` with a Cyrillic ``а``, full-width letters) is kept, and marked: :attr:`LinkHost.host` is the
ASCII name the browser looks up (``xn--pple-43d.com``), :attr:`LinkHost.written` the letters as written.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import ada_url

_SCHEME = re.compile(r"(https?)://", re.ASCII | re.IGNORECASE)
# invisible though not of the categories below: fillers, the combining grapheme joiner, variation selectors
_INVISIBLE = frozenset({0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x2800, 0x3164, 0xFFA0})
_INVISIBLE_RANGES = ((0x180B, 0x180F), (0xFE00, 0xFE0F), (0xE0000, 0xE0FFF))
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"})


class BadLink(ValueError):
    """A link refused: its message says why, for the person or agent to read."""


@dataclass(frozen=True)
class LinkHost:
    """The host a link opens. ``host``: ASCII, lower case, no port, as the browser looks it up (``xn--``
    for a non-ASCII name; an IPv6 address in brackets). ``written``: the host as the link writes it."""

    host: str
    written: str

    @property
    def lookalike(self) -> bool:
        """Written with other letters than the name looked up: shown as ``host``, with a warning."""
        return self.written.lower() != self.host


def _hidden(c: str) -> bool:
    o = ord(c)
    if c == " " or o in _INVISIBLE or any(lo <= o <= hi for lo, hi in _INVISIBLE_RANGES):
        return True
    return unicodedata.category(c) in _HIDDEN_CATEGORIES


def link_host(url: str) -> LinkHost:
    """The host a person opens from ``url`` (an http or https link), or :class:`BadLink`."""
    if not isinstance(url, str) or not url:
        raise BadLink("not a link")
    if "\\" in url:
        raise BadLink("it has a backslash, which a browser reads as a slash: it may open another host than shown")
    if any(_hidden(c) for c in url):
        raise BadLink("it has a blank, control or invisible character, which a browser drops or reads otherwise")
    m = _SCHEME.match(url)
    if m is None:
        raise BadLink("only an https or http link written scheme://host is posted")
    authority = re.split(r"[/?#]", url[m.end():], maxsplit=1)[0]
    if "@" in authority:
        raise BadLink("it has a user name before '@': a browser opens the host after it, not the name before")
    if "%" in authority:
        raise BadLink("its host is percent-encoded: a browser decodes it to another name than written")
    written = authority
    if not written.startswith("["):
        written = written.rsplit(":", 1)[0] if ":" in written else written
    elif "]" in written:
        written = written[: written.index("]") + 1]
    try:
        parsed = ada_url.URL(url)
        host = parsed.hostname
    except (ValueError, TypeError):
        raise BadLink("a browser cannot open it (not a valid link)") from None
    if not host or not written:
        raise BadLink("it names no host")
    if parsed.protocol not in ("http:", "https:"):
        raise BadLink("only an https or http link is posted")
    if written.isascii() and written.lower() != host:
        raise BadLink(f"a browser reads its host {written!r} as {host!r}")
    if not host.isascii():  # ada answers with the ASCII name; never show anything else as the host
        raise BadLink("its host has no ASCII name")
    return LinkHost(host, written)


def refusal(url: object) -> str | None:
    """Why a link is refused (``"refused: ..."``, ``"must be a string"``), or None when it may be shown."""
    if not isinstance(url, str):
        return "must be a string"
    try:
        link_host(url)
    except BadLink as e:
        return f"refused: {e}"
    return None


def shown_host(h: LinkHost) -> str:
    """How a prompt names the host: the ASCII name, and for a look-alike the letters the link shows too."""
    if not h.lookalike:
        return h.host
    return f"{h.host} (the link writes it {h.written!r}: letters that look like others; this is the name opened)"
