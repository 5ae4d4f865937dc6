"""Session rules, fast: what a rule covers (exactly, never a prefix; never across sessions or proxy
runs), how ``s`` / ``session`` / 🔁 / the extra number read, and the inbox part (add, match, revoke,
end, expire with ``now`` passed in)."""

from __future__ import annotations

from typing import Any

import pytest

from bot.answers import Answer, Candidate, Refusal, Target, resolve
from bot.inbox.session_rule_store import SessionRules
from bot.inbox.session_rules import LABEL, Scope, offered, origin_of, scope_of
from bot.inbox.store import Inbox

KEY = "0123456789abcdef0123456789abcdef:3"
OPTIONS = (("once", "Allow once"), ("always", "Always allow"), ("no", "Reject"))
KINDS = ("allow_once", "allow_always", "reject_once")


def rec(command: Any = "rm -rf build", *, raw: bool = False, **over: Any) -> dict[str, Any]:
    r: dict[str, Any] = {
        "key": KEY, "session_id": "sess-1", "tool_name": "Bash", "tool_kind": "execute",
        "raw_input": command if raw else {"command": command} if command is not None else None,
        "locations": [], "content": [],
        "title": "Run it",
    }
    r.update(over)
    return r


def test_scope_is_the_proxy_run_the_session_the_tool_and_the_exact_command() -> None:
    assert scope_of(rec()) == Scope("0123456789abcdef0123456789abcdef", "sess-1", "Bash", '{"command":"rm -rf build"}')
    assert scope_of(rec(command=["rm", "-rf", "a b"])) == Scope("0123456789abcdef0123456789abcdef", "sess-1", "Bash",
                                                                '{"command":"rm -rf \'a b\'"}')


@pytest.mark.parametrize("attack", [
    rec("rm -rf build ~"),  # a longer command: never a prefix
    rec("rm -rf build; rm -rf ~"),
    rec("rm -rf build\nrm -rf ~"),
    rec("rm -rf build "),  # not even whitespace is ignored
    rec("RM -rf build"),
    rec(session_id="sess-2"),  # another session id
    rec(key="fedcba9876543210fedcba9876543210:1"),  # the same session id from another proxy run (another agent)
    rec(tool_name="Shell"),
    rec({"command": "rm -rf build", "cwd": "/"}, raw=True),  # the same command elsewhere
    rec({"command": "rm -rf build", "env": {"HOME": "/"}}, raw=True),
])
def test_anything_but_the_same_request_falls_outside_the_rule(attack: dict[str, Any]) -> None:
    assert scope_of(attack) != scope_of(rec())


def test_the_models_prose_about_the_command_is_not_part_of_it() -> None:
    described = rec({"command": "rm -rf build", "description": "Clean the build output"}, raw=True)
    assert scope_of(described) == scope_of(rec())
    a = scope_of(rec({"command": "ls", "cwd": "/tmp"}, raw=True))
    assert a is not None and a.subject == '{"command":"ls","settings":{"cwd":"/tmp"}}'


def test_only_the_proxys_keys_carry_an_origin() -> None:
    assert origin_of(KEY) == "0123456789abcdef0123456789abcdef"
    for bad in (None, "", "mykey", "0123456789abcdef:1", "0123456789abcdef0123456789abcdef", "0123456789ABCDEF:1",
                "0123456789abcdef0123456789abcdef:1:2",
                "0123456789abcdef0123456789abcdef:x", "x0123456789abcdef0123456789abcdef:1"):
        assert origin_of(bad) is None, bad
    assert scope_of(rec(key="agent-chosen")) is None  # a direct submission without the proxy's key
    assert scope_of(rec(key=None)) is None


def test_edits_are_the_same_files_and_without_tool_the_kind_counts() -> None:
    edit = rec(command=None, tool_name=None, tool_kind="edit",
               locations=[{"path": "/w/a.py"}], content=[{"type": "diff", "path": "/w/a.py", "newText": "x"}])
    assert scope_of(edit) == Scope("0123456789abcdef0123456789abcdef", "sess-1", "edit", '{"paths":["/w/a.py"]}')
    other = {**edit, "locations": [{"path": "/w/a.py"}, {"path": "/w/b.py"}]}
    assert scope_of(other) != scope_of(edit)
    # Gemini: an execute request without rawInput: the command is the title, as the prompt shows it
    assert scope_of(rec(command=None, tool_name=None, title="`touch x`")) == Scope(
        "0123456789abcdef0123456789abcdef", "sess-1", "execute", '{"command":"touch x"}')
    assert scope_of(rec(command=None, tool_name=None, tool_kind=None)) is None  # no tool, no kind
    assert scope_of(rec(command=None, tool_kind="other", title="")) is None  # nothing to be the same
    # a file alone says what is the same only for file tools: an execute or fetch with other input is not
    odd = rec({"cmd": "rm -rf ~"}, raw=True, tool_name=None, locations=[{"path": "/w/a.py"}])
    assert scope_of(odd) is None and scope_of({**odd, "tool_kind": "fetch"}) is None


def test_offered_only_with_an_allow_once_option() -> None:
    assert offered(rec(), KINDS) == LABEL
    edit = rec(command=None, tool_kind="edit", locations=[{"path": "/w/a.py"}])
    assert offered(edit, KINDS) == "Allow for this session (these files)"
    assert not offered(rec(), ("allow_always", "reject_once"))
    assert not offered(rec(key=None), KINDS)


def cand(text: str | None = None, *, reaction: str | None = None, explicit: bool = True) -> Candidate:
    via = "reaction" if reaction else "matrix"
    return Candidate("$a", "@alice:hs", via, "$p" if explicit else None, None, text, reaction, None, None, None,
                     None, explicit)


def tgt(session: bool = True, kinds: tuple[str, ...] = KINDS) -> Target:
    return Target("sess-1:1", "$p", OPTIONS, "d", 1, True, kinds, True, LABEL if session else None)


@pytest.mark.parametrize("text", ["s", "S", "session", "Session.", "4", " 4. ", "s - just this once more",
                                  "session: fine", LABEL.lower()])
def test_s_session_and_the_extra_number_answer_allow_once_with_a_rule(text: str) -> None:
    for explicit in (True, False):
        got = resolve(cand(text, explicit=explicit), tgt(), [tgt()])
        assert isinstance(got, Answer) and got.option_id == "once" and got.session_rule, (text, got)


def test_reactions_and_numbers_without_the_offer() -> None:
    for key in ("\U0001f501", "\U0001f501\ufe0f", "4\ufe0f\u20e3"):
        got = resolve(cand(reaction=key), tgt(), [])
        assert isinstance(got, Answer) and got.session_rule and got.option_id == "once"
    got = resolve(cand(reaction="\U0001f501"), tgt(session=False), [])
    assert isinstance(got, Refusal) and "no allow-for-this-session" in got.message
    assert isinstance(resolve(cand("4"), tgt(session=False), []), Refusal)  # no option 4
    assert resolve(cand("s", explicit=False), tgt(session=False), []) is None  # just a letter
    plain = resolve(cand("1"), tgt(), [])
    assert isinstance(plain, Answer) and not plain.session_rule
    assert resolve(cand("s sounds good"), tgt(), []) is None  # conversation, not an answer


def test_an_agent_option_named_s_does_not_take_the_word() -> None:
    named = Target("sess-1:1", "$p", (*OPTIONS, ("x", "S")), "d", 1, True, (*KINDS, "other"), True, LABEL)
    got = resolve(cand("s"), named, [])
    assert not isinstance(got, Answer)  # two lines share the name: neither is picked


@pytest.fixture
def store(inbox: Inbox) -> SessionRules:
    return SessionRules(inbox)


async def test_store_matches_exactly_and_ends_revokes_and_expires(store: SessionRules) -> None:
    a = scope_of(rec())
    b = scope_of(rec(session_id="sess-2"))
    assert a is not None and b is not None
    rule = await store.add(a, set_by="@alice:hs", request_id="sess-1:1", now=100.0)
    again = await store.add(a, set_by="@carol:hs", request_id="sess-1:2", now=110.0)
    assert again.id == rule.id and again.set_by == "@alice:hs"  # one rule per scope
    assert await store.match(b, 120.0) is None
    assert (await store.match(a, 130.0)) is not None
    assert (await store.list())[0].used_at == 130.0
    await store.add(b, set_by="@alice:hs", request_id="sess-2:1", now=140.0)
    assert [r.scope.session_id for r in await store.list("sess-2")] == ["sess-2"]
    assert await store.expire(idle_before=135.0) == 1  # a: unused since 130
    assert await store.match(a, 150.0) is None
    assert await store.end("fedcba9876543210fedcba9876543210") == 0  # another proxy run's end touches nothing
    assert await store.end("0123456789abcdef0123456789abcdef", "sess-2") == 1
    assert await store.list() == []
    r = await store.add(a, set_by="@alice:hs", request_id="sess-1:3", now=200.0)
    assert (await store.revoke(r.id)) is not None and await store.revoke(r.id) is None
    assert await store.match(a, 210.0) is None
    assert r.to_api()["command"] == "rm -rf build" and r.to_api()["paths"] is None
    # Any request of the session keeps its rules alive; the ttl counts from the session's last request.
    await store.add(a, set_by="@alice:hs", request_id="sess-1:4", now=300.0)
    other = scope_of(rec("make"))
    assert other is not None and await store.match(other, 400.0) is None
    assert (await store.list())[0].used_at == 400.0
    assert await store.expire(idle_before=350.0) == 0


def test_the_ttl_is_a_duration_and_a_bad_one_names_the_key() -> None:
    from bot.config import ConfigError, parse_config

    base = {"matrix": {"homeserver": "http://hs", "user_id": "@b:hs", "room": "!r:hs", "password": "pw"}}
    assert parse_config(base, env={}).prompts.session_rule_ttl == 12 * 3600
    assert parse_config({**base, "prompts": {"session_rule_ttl": "30m"}}, env={}).prompts.session_rule_ttl == 1800
    for bad in ("0s", "soon"):
        with pytest.raises(ConfigError) as e:
            parse_config({**base, "prompts": {"session_rule_ttl": bad}}, env={})
        assert str(e.value).startswith("prompts.session_rule_ttl")


def test_the_rooms_notice_shows_the_command_as_prose() -> None:
    from bot.inbox.session_rule_store import SessionRule
    from bot.room.answers import rule_notice

    scope = Scope("0123456789abcdef0123456789abcdef", "s1", "Bash", '{"command":"echo @room\\n1. Allow once"}')
    text = rule_notice(SessionRule(3, scope, "@alice:hs", "s1:1", 1.0, 1.0))
    assert "\n" not in text and "@room" not in text and "rules revoke 3" in text
