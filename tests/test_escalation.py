"""Escalation's config (one line naming the key) and its page; the checkpoints' timing (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from bot.config import ConfigError, parse_config
from bot.room.pages import LISTED, page
from bot.service.checkpoints import due, intervals

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


def _rec(n: int, kind: str = "permission", title: str = "t") -> Any:
    from bot.inbox.record import Record, State

    return Record(id=f"s:{n}", session_id="s", request_seq=n, key=None, label=None, tool_call_id="c", title=title,
                  tool_kind=None, tool_name=None, options=[], raw_input=None, locations=[], content=[], params={},
                  digest="d", revision=1, state=State.PENDING, requested_at=0.0, expires_at=9.0,
                  prompt_event_id=f"$p{n}", prompt_edited=False, outcome=None, kind=kind)


def test_a_page_of_one_is_a_text_replying_to_the_prompt_and_mentions() -> None:
    c = page([_rec(1)], ["@oncall:hs"], 300.0, "!r:hs")
    assert c["msgtype"] == "m.text"  # an m.notice never notifies under the default push rules
    assert c["m.mentions"] == {"user_ids": ["@oncall:hs"]}
    assert c["m.relates_to"] == {"m.in_reply_to": {"event_id": "$p1"}}
    assert c["body"].startswith("@oncall:hs: this permission request has waited 5m")
    assert 'href="https://matrix.to/#/@oncall:hs"' in c["formatted_body"]
    assert "https://matrix.to/#/!r:hs/$p1" in c["body"]
    assert page([_rec(1, "question")], ["@o:hs"], 60.0, "!r:hs")["body"].startswith("@o:hs: this question has")
    assert page([_rec(1, "plan")], ["@o:hs"], 60.0, "!r:hs")["body"].startswith("@o:hs: this plan has")


def test_a_page_names_every_prompt_waiting_and_nothing_the_agent_wrote_is_a_line_or_a_mention() -> None:
    recs = [_rec(i, "question" if i == 2 else "permission", title=f"x @room @alice:hs\n1. Allow {i}")
            for i in range(1, 26)]
    c = page(recs, ["@oncall:hs", "@lead:hs"], 300.0, "!r:hs")
    assert "m.relates_to" not in c and c["m.mentions"] == {"user_ids": ["@oncall:hs", "@lead:hs"]}
    lines = c["body"].split("\n")
    assert lines[0].startswith("@oncall:hs, @lead:hs: 25 prompts (24 permission requests, 1 question) have waited")
    assert len(lines) == 1 + LISTED + 1 and lines[-1] == "- and 5 more"
    assert all(line.startswith(("- Permission request s:", "- Question s:")) for line in lines[1:-1])
    assert "$p20" in c["body"] and "$p21" not in c["body"]
    assert "@room" not in c["body"] and "@alice:hs" not in c["body"] and "@room" not in c["formatted_body"]
    assert c["formatted_body"].count("<li>") == LISTED + 1


def test_checkpoint_timing() -> None:
    assert intervals({}) == (600.0, 60.0)
    assert intervals({"PERMISSION_BOT_CHECKPOINT_PERIOD": "2", "PERMISSION_BOT_CHECKPOINT_DELAY": "x"}) == (2.0, 60.0)
    assert due(0.0, 100.0, 600.0, 60.0) == 130.0  # none posted yet: within the minute
    assert due(50.0, 100.0, 600.0, 60.0) == 650.0  # one posted 50 s before: when the 10 minutes end
    assert due(-1000.0, 100.0, 600.0, 60.0) == 130.0
