"""The API's auth decision (pure): who a header names, and what each role may do."""

from __future__ import annotations

import pytest

from bot.api.auth import AGENT, DECIDER, LEGACY_NAME, Caller, Denied, Tokens, authenticate, may
from bot.config import parse_config

MIN = {"matrix": {"homeserver": "http://hs", "user_id": "@b:hs", "room": "!r:hs", "password": "file-pw"}}
A_SECRET, D_SECRET, L_SECRET = "agent-secret-0123456789", "decider-secret-0123456789", "legacy-secret-0123"


def _tokens(legacy: bool = True) -> Tokens:
    api: dict[str, object] = {
        "tokens": [
            {"name": "laptop", "role": "agent", "secret": A_SECRET},
            {"name": "alice-cli", "role": "decider", "secret_env": "ALICE_TOKEN"},
        ]
    }
    if legacy:
        api["token"] = L_SECRET
    return Tokens.from_config(parse_config({**MIN, "api": api}, env={"ALICE_TOKEN": D_SECRET}).api)


def test_identify_by_secret_and_scheme() -> None:
    t = _tokens()
    assert t.identify(f"Bearer {A_SECRET}") == Caller("laptop", frozenset({AGENT}))
    assert t.identify(f"bearer  {D_SECRET} ") == Caller("alice-cli", frozenset({DECIDER}))
    assert t.identify(f"Bearer {L_SECRET}") == Caller(LEGACY_NAME, frozenset({AGENT, DECIDER}))
    for bad in (None, "", "Bearer", f"Basic {A_SECRET}", f"Bearer {A_SECRET}x", f"Bearer {A_SECRET[:-1]}", A_SECRET):
        assert t.identify(bad) is None, bad


def test_no_token_configured_fails_closed() -> None:
    got = authenticate(Tokens([]), f"Bearer {A_SECRET}")
    assert isinstance(got, Denied) and got.status == 401 and "no API token configured" in got.reason
    got = authenticate(_tokens(), "Bearer wrong")
    assert isinstance(got, Denied) and got.status == 401


AGENT_C = Caller("laptop", frozenset({AGENT}))
DECIDER_C = Caller("alice-cli", frozenset({DECIDER}))
LEGACY_C = Caller(LEGACY_NAME, frozenset({AGENT, DECIDER}))


@pytest.mark.parametrize(
    ("caller", "action", "submitted_by", "allowed"),
    [
        (AGENT_C, "read", None, True),
        (AGENT_C, "submit", None, True),
        (AGENT_C, "decide", "laptop", False),  # not even on its own request
        (AGENT_C, "cancel", "laptop", True),
        (AGENT_C, "cancel", "other-agent", False),
        (AGENT_C, "cancel", None, False),  # a request from before tokens were named
        (DECIDER_C, "read", None, True),
        (DECIDER_C, "decide", "laptop", True),
        (DECIDER_C, "cancel", "laptop", True),
        (DECIDER_C, "submit", None, False),
        (LEGACY_C, "submit", None, True),
        (LEGACY_C, "decide", "laptop", True),
        (LEGACY_C, "cancel", None, True),
    ],
)
def test_what_each_role_may_do(caller: Caller, action: str, submitted_by: str | None, allowed: bool) -> None:
    got = may(caller, action, submitted_by)  # type: ignore[arg-type]
    if allowed:
        assert got is None
    else:
        assert got is not None and got.status == 403 and caller.name in got.reason


def test_decisions_are_recorded_under_the_token_name() -> None:
    assert DECIDER_C.answered_by == "api:alice-cli" and LEGACY_C.answered_by == "api:api.token"
