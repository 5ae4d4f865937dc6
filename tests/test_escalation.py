"""Escalation's config (one line naming the key) and its notice; the checkpoints' timing (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from bot.config import ConfigError, parse_config
from bot.service.checkpoints import due, intervals
from bot.service.escalation import notice

MIN: dict[str, Any] = {"matrix": {"homeserver": "http://hs", "user_id": "@b:hs", "room": "!r:hs", "password": "pw"}}


def test_escalation_config_per_room_and_default() -> None:
    cfg = parse_config({**MIN, "escalation": {"after": "5m", "mention": ["@oncall:hs"]},
                        "rooms": [{"name": "infra", "room": "!i:hs", "escalation": {"after": 60, "mention": ["@i:hs"]}},
                                  {"name": "docs", "room": "!d:hs"}]}, env={})
    assert cfg.escalation_of("default") is not None and cfg.escalation_of("default").after == 300.0  # type: ignore[union-attr]
    assert cfg.escalation_of("infra").mention == ["@i:hs"]  # type: ignore[union-attr]
    assert cfg.escalation_of("docs") == cfg.escalation
    assert parse_config(MIN, env={}).escalation_of("default") is None


@pytest.mark.parametrize(("esc", "key"), [
    ({"after": "soon", "mention": ["@a:hs"]}, "escalation.after"),
    ({"after": "0s", "mention": ["@a:hs"]}, "escalation.after"),
    ({"after": "5m", "mention": []}, "escalation.mention"),
    ({"after": "5m", "mention": ["oncall"]}, "escalation.mention"),
    ({"after": "5m"}, "escalation.mention"),
    ({"after": "5m", "mention": ["@a:hs"], "who": 1}, "escalation.who"),
])
def test_bad_escalation_is_one_line_naming_the_key(esc: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config({**MIN, "escalation": esc}, env={})
    assert str(e.value).startswith(key) and "\n" not in str(e.value), str(e.value)


def test_the_notice_replies_to_the_prompt_and_mentions() -> None:
    from bot.config.escalation import EscalationConfig
    from bot.inbox.record import Record, State

    rec = Record(id="s:1", session_id="s", request_seq=1, key=None, label=None, tool_call_id="c", title="t",
                 tool_kind=None, tool_name=None, options=[], raw_input=None, locations=[], content=[], params={},
                 digest="d", revision=1, state=State.PENDING, requested_at=0.0, expires_at=9.0,
                 prompt_event_id="$p", prompt_edited=False, outcome=None)
    c = notice(rec, EscalationConfig(after=300.0, mention=["@oncall:hs"]))
    assert c["m.mentions"] == {"user_ids": ["@oncall:hs"]}
    assert c["m.relates_to"] == {"m.in_reply_to": {"event_id": "$p"}}
    assert c["body"].startswith("@oncall:hs: this permission request has waited 5m")


def test_checkpoint_timing() -> None:
    assert intervals({}) == (600.0, 60.0)
    assert intervals({"PERMISSION_BOT_CHECKPOINT_PERIOD": "2", "PERMISSION_BOT_CHECKPOINT_DELAY": "x"}) == (2.0, 60.0)
    assert due(0.0, 100.0, 600.0, 60.0) == 130.0  # none posted yet: within the minute
    assert due(50.0, 100.0, 600.0, 60.0) == 650.0  # one posted 50 s before: when the 10 minutes end
    assert due(-1000.0, 100.0, 600.0, 60.0) == 130.0
