"""Which option a decision picks (agentproto's semantics)."""

from __future__ import annotations

import pytest

from bot.inbox.decisions import NoFittingOption, choose, timeout_choice

FOUR = [
    {"optionId": k, "name": k, "kind": k}
    for k in ("allow_once", "allow_always", "reject_once", "reject_always")
]
ONLY_ALLOW = [{"optionId": "ok", "name": "OK", "kind": "allow_once"}]
ONLY_REJECT = [{"optionId": "no", "name": "No", "kind": "reject_once"}]
CHOOSE = [{"optionId": "a", "name": "A", "kind": "other"}]


def test_approve() -> None:
    assert choose(FOUR, "approve") == "allow_once"
    assert choose(FOUR, "approve", scope="always") == "allow_always"
    assert choose(ONLY_ALLOW, "approve", scope="always") == "ok"
    with pytest.raises(NoFittingOption):
        choose(ONLY_REJECT, "approve")


def test_deny() -> None:
    assert choose(FOUR, "deny") == "reject_once"
    assert choose(FOUR, "deny", scope="always") == "reject_always"
    assert choose(ONLY_ALLOW, "deny") is None  # cancels when nothing reject-flavoured is offered


def test_exact_option() -> None:
    assert choose(CHOOSE, "approve", option_id="a") == "a"
    with pytest.raises(NoFittingOption):
        choose(CHOOSE, "approve", option_id="b")
    assert choose(FOUR, "cancel") is None


def test_timeout() -> None:
    assert timeout_choice(FOUR, "reject") == "reject_once"
    assert timeout_choice(ONLY_ALLOW, "reject") is None
    assert timeout_choice(FOUR, "cancel") is None
