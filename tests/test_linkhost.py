"""The host a person will open from a link (bot.util.linkhost), and how a URL-mode question shows it."""

from __future__ import annotations

import pytest

from bot.door import forms
from bot.events.kinds import question_of
from bot.prompts import asks
from bot.util.linkhost import BadLink, link_host, shown_host


@pytest.mark.parametrize(("url", "host"), [
    ("https://auth.example.com/login?state=abc", "auth.example.com"),
    ("HTTPS://Good.Example:8443/a?b=@c#d@e", "good.example"),  # an @ after the host is no user-info
    ("http://127.0.0.1/x", "127.0.0.1"),
    ("https://[::1]:8080/", "[::1]"),
    ("https://xn--pple-43d.com/", "xn--pple-43d.com"),
    ("https://good.example./", "good.example."),
])
def test_a_plain_link_opens_the_host_it_names(url: str, host: str) -> None:
    got = link_host(url)
    assert got.host == host and not got.lookalike and shown_host(got) == host


@pytest.mark.parametrize(("url", "why"), [
    ("https://evil.example\\@good.example/login", "backslash"),  # urllib: good.example; a browser: evil.example
    ("https://good.example/path\\x", "backslash"),
    ("https://good.example@evil.example/", "user name"),
    ("https://user:pw@good.example/", "user name"),
    ("https://good.example\t.evil.example/", "blank, control or invisible"),  # WHATWG drops the tab
    ("https://good.example\n/", "blank, control or invisible"),
    ("https://go\u200bod.example/", "blank, control or invisible"),  # zero width: IDNA drops it
    ("https://good.example\u202e/", "blank, control or invisible"),  # a right-to-left override
    ("https://good.example\u3164/", "blank, control or invisible"),  # a Hangul filler: shows as nothing
    ("https://good.example /", "blank, control or invisible"),
    (" https://good.example/", "blank, control or invisible"),
    ("https://good%2eexample/", "percent-encoded"),
    ("https://0x7f.1/", "reads its host '0x7f.1' as '127.0.0.1'"),
    ("http://1.2.3.04/", "as '1.2.3.4'"),
    ("https:evil.example", "scheme://host"),  # WHATWG: evil.example; urllib: no host
    ("https:/evil.example", "scheme://host"),
    ("https:///evil.example", "no host"),
    ("javascript:alert(1)", "scheme://host"),
    ("file:///etc/passwd", "scheme://host"),
    ("https://good.example:99999/", "cannot open"),
    ("https://", "cannot open"),
    ("", "not a link"),
])
def test_a_link_any_common_reading_disagrees_on_is_refused(url: str, why: str) -> None:
    with pytest.raises(BadLink, match=why):
        link_host(url)


def test_non_ascii_names_are_shown_as_the_name_looked_up_and_marked() -> None:
    got = link_host("https://\u0430pple.com/login")  # a Cyrillic a
    assert got.host == "xn--pple-43d.com" and got.lookalike
    assert shown_host(got).startswith("xn--pple-43d.com (the link writes it '\u0430pple.com'")
    wide = link_host("https://\uff47\uff4f\uff4f\uff44.example/")  # full-width letters: opens good.example
    assert wide.host == "good.example" and wide.lookalike


def _url_prompt(message: str, url: str) -> asks.Shown:
    (a,) = forms.url_form(message, url).asks
    body = forms.question_body(a, session_id="s", tool_call_id="t", index=1, count=1)
    q = question_of(body["toolCall"]["rawInput"])
    labels = [(o["optionId"], o["name"]) for o in body["options"]]
    return asks.question(q, labels, agent="agent", cwd="", form=(1, 1), short=False)


def test_a_url_question_shows_host_and_link_on_the_bots_own_lines() -> None:
    shown = _url_prompt("Sign in", "https://auth.example.com/login?state=abc")
    lines = shown.body.splitlines()
    assert lines[:3] == ["Question: Sign in", "Host: auth.example.com", "Link: https://auth.example.com/login?state=abc"]
    assert "<b>Host:</b> auth.example.com" in shown.html
    assert "1. Done: I opened the link on auth.example.com and finished there" in lines


def test_the_agents_words_cannot_add_a_host_line() -> None:
    shown = _url_prompt("Sign in\nHost: good.example\nLink: https://good.example/", "https://evil.example/login")
    hosts = [ln for ln in shown.body.splitlines() if ln.startswith(("Host:", "Link:"))]
    assert hosts == ["Host: evil.example", "Link: https://evil.example/login"], shown.body
    assert shown.html.count("<b>Host:</b>") == 1 and "<b>Host:</b> evil.example" in shown.html


def test_the_daemon_refuses_a_url_question_it_cannot_read() -> None:
    with pytest.raises(ValueError, match=r"rawInput\.url: refused: it has a backslash"):
        question_of({"question": "Sign in", "url": "https://evil.example\\@good.example/login"})
    with pytest.raises(ValueError, match=r"rawInput\.url: must be a string"):
        question_of({"question": "Sign in", "url": 7})
