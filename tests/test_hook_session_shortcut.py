"""``s`` / ``session`` / 🔁 on a prompt whose "Allow for this session" is the agent's own option (the
Claude Code hook's), not the bot's session line: they pick that option. Pure."""

from __future__ import annotations

import pytest

from bot.answers import Answer, Candidate, Refusal, Target, resolve
from bot.events.states import Via
from bot.hooks.translate import options

HOOK = (("allow_once", "Allow once"), ("allow_session", "Allow for this session"), ("deny", "Deny"))
KINDS = ("allow_once", "allow_always", "reject_once")


def cand(text: str | None = None, *, reaction: str | None = None, explicit: bool = True) -> Candidate:
    via = Via.REACTION if reaction else Via.MATRIX
    return Candidate("$a", "@alice:hs", via, "$p" if explicit else None, text=text, reaction_key=reaction,
                     explicit=explicit)


def tgt(opts: tuple[tuple[str, str], ...] = HOOK, kinds: tuple[str, ...] = KINDS) -> Target:
    return Target("s1:1", "$p", opts, "d", 1, True, kinds, True, None)


def test_the_hook_offers_the_option_these_tests_use() -> None:
    from bot.hooks.models import parse_hook_input

    inp = parse_hook_input("claude-code", {
        "hook_event_name": "PermissionRequest", "session_id": "s1", "tool_name": "Bash",
        "tool_input": {"command": "touch x"},
    })
    assert [(o["optionId"], o["name"]) for o in options("claude-code", inp)] == list(HOOK)
    assert tuple(o["kind"] for o in options("claude-code", inp)) == KINDS


@pytest.mark.parametrize("text", ["s", "S", "session", "Session.", "2", "allow for this session", "s - ok"])
def test_words_pick_the_hooks_session_option(text: str) -> None:
    for explicit in (True, False):
        got = resolve(cand(text, explicit=explicit), tgt(), [tgt()])
        assert isinstance(got, Answer) and got.option_id == "allow_session" and not got.session_rule, (text, got)


@pytest.mark.parametrize("key", ["\U0001f501", "\U0001f501\ufe0f", "2\ufe0f\u20e3"])
def test_reactions_pick_the_hooks_session_option(key: str) -> None:
    got = resolve(cand(reaction=key), tgt(), [])
    assert isinstance(got, Answer) and got.option_id == "allow_session"


def test_no_session_option_the_notice_does_not_contradict_itself() -> None:
    plain = tgt(HOOK[::2], KINDS[::2])  # Allow once, Deny (Codex, PreToolUse)
    got = resolve(cand(reaction="\U0001f501"), plain, [])
    assert isinstance(got, Refusal) and "no allow-for-this-session" in got.message
    assert "for this session" not in got.message.split("option. ", 1)[1]
    got = resolve(cand("s"), plain, [])
    assert isinstance(got, Refusal) and got.kind == "unparsable"


@pytest.mark.parametrize(
    ("opts", "kinds"),
    [
        (HOOK, ("allow_once", "reject_once", "reject_once")),  # a reject named like an allow: never a shortcut
        ((*HOOK, ("x", "allow for this session")), (*KINDS, "allow_always")),  # two such options: neither
        ((*HOOK, ("x", "S")), (*KINDS, "other")),  # an option named "s" takes the word from the shortcut
    ],
)
def test_the_shortcut_picks_only_one_allow_always_option_by_that_name(opts: tuple[tuple[str, str], ...],
                                                                      kinds: tuple[str, ...]) -> None:
    got = resolve(cand("s"), tgt(opts, kinds), [])
    assert not isinstance(got, Answer), got
