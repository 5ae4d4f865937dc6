"""Many station rooms, the pure and local parts: config errors (one line naming the key), routing by
credential, per-room listing and timeline marks, rules that name a room, an old state folder's records."""

from __future__ import annotations

import copy
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from bot.answers import timeline
from bot.config import ConfigError, parse_config
from bot.inbox.rules import parse_rules
from bot.inbox.rules.flags import build_rules
from bot.inbox.store import Inbox
from bot.inbox.submission import parse_submission
from tests.support.station import request_body

S = "s" * 20
BASE: dict[str, Any] = {
    "matrix": {"homeserver": "http://hs", "user_id": "@b:hs", "room": "!main:hs", "password": "pw"},
    "api": {"tokens": [
        {"name": "laptop", "role": "agent", "secret": "a" + S},
        {"name": "infra-proxies", "role": "agent", "secret": "b" + S},
        {"name": "bob-cli", "role": "decider", "secret": "c" + S},
    ]},
    "harnesses": [{"name": "h1", "url": "http://127.0.0.1:4700"}],
}
INFRA = {"name": "infra", "room": "#infra:hs", "answerers": {"users": ["@bob:hs"]},
         "tokens": ["infra-proxies"], "harnesses": ["h1"]}


def _cfg(rooms: list[dict[str, Any]], **patch: Any) -> Any:
    data = copy.deepcopy(BASE)
    data["rooms"] = rooms
    for k, v in patch.items():
        data[k] = v
    return parse_config(data, env={})


def test_routing_is_by_token_and_harness_only() -> None:
    cfg = _cfg([INFRA])
    assert cfg.room_names == ["default", "infra"]
    assert cfg.room_of_token("infra-proxies") == "infra" and cfg.room_of_harness("h1") == "infra"
    assert cfg.room_of_token("laptop") == "default" and cfg.room_of_token("api.token") == "default"
    assert cfg.room_of_token(None) == "default"
    assert cfg.answerers_of("infra").users == ["@bob:hs"] and cfg.answerers_of("default").users == []


def test_an_existing_config_is_one_default_room() -> None:
    cfg = parse_config(copy.deepcopy(BASE), env={})
    assert cfg.rooms == [] and cfg.room_names == ["default"]


@pytest.mark.parametrize(
    ("rooms", "line"),
    [
        ([INFRA, {**INFRA, "name": "ops", "room": "!ops:hs", "harnesses": []}],
         'rooms.1.tokens: "infra-proxies" is already in room "infra"'),
        ([INFRA, {"name": "ops", "room": "!ops:hs", "harnesses": ["h1"]}],
         'rooms.1.harnesses: "h1" is already in room "infra"'),
        ([INFRA, {"name": "infra", "room": "!ops:hs"}], 'rooms.1.name: "infra" is used twice'),
        ([INFRA, {"name": "ops", "room": "#infra:hs"}], 'rooms.1.room: #infra:hs is already room "infra"'),
        ([{"name": "ops", "room": "!main:hs"}], 'rooms.0.room: !main:hs is already room "default"'),
        ([{"name": "in fra", "room": "!x:hs"}], "rooms.0.name: must be 1-64 letters"),
        ([{"name": "default", "room": "!x:hs"}], "rooms.0.name: 'default' is the [matrix] room's name"),
        ([{"name": "ops", "room": "ops"}], "rooms.0.room: must be a room id"),
        ([{"name": "ops", "room": "!x:hs", "tokens": ["nope"]}], 'rooms.0.tokens: "nope" is not a token'),
        ([{"name": "ops", "room": "!x:hs", "tokens": ["bob-cli"]}], 'rooms.0.tokens: "bob-cli" is not an agent token'),
        ([{"name": "ops", "room": "!x:hs", "harnesses": ["h2"]}], 'rooms.0.harnesses: "h2" is not a harness'),
        ([{"name": "ops", "room": "!x:hs", "answerers": {"users": "@a:hs"}}], "rooms.0.answerers.users"),
        ([{"name": "ops", "room": "!x:hs", "colour": "red"}], "rooms.0.colour: unknown key"),
        ([{"room": "!x:hs"}], "rooms.0.name: required"),
    ],
)
def test_room_config_errors_are_one_line_naming_the_key(rooms: list[dict[str, Any]], line: str) -> None:
    with pytest.raises(ConfigError) as e:
        _cfg(rooms)
    assert str(e.value).startswith(line), str(e.value)
    assert "\n" not in str(e.value) and S not in str(e.value)


def test_decider_rooms_must_name_rooms_and_only_deciders_have_them() -> None:
    tokens = copy.deepcopy(BASE["api"]["tokens"])
    tokens[2]["rooms"] = ["infra", "default"]
    assert _cfg([INFRA], api={"tokens": tokens}).api.tokens[2].rooms == ["infra", "default"]
    tokens[2]["rooms"] = ["ops"]
    with pytest.raises(ConfigError, match=r'^api\.tokens\.2\.rooms: "ops" is not a room'):
        _cfg([INFRA], api={"tokens": tokens})
    tokens[2].pop("rooms")
    tokens[0]["rooms"] = ["infra"]
    with pytest.raises(ConfigError, match=r"^api\.tokens\.0\.rooms: only a decider token has rooms"):
        _cfg([INFRA], api={"tokens": tokens})


def test_rules_may_name_a_room() -> None:
    rules = parse_rules([{"match": {"room": "infra", "toolName": "Bash"}, "decision": "approve"}])
    infra, default = {"room": "infra", "tool_name": "Bash"}, {"room": "default", "tool_name": "Bash"}
    assert rules[0].matches(infra) and not rules[0].matches(default)
    assert not rules[0].matches({"tool_name": "Bash"})  # a record without a room is the default room's
    scoped = build_rules([("approve", "Bash")], room="infra")
    assert scoped[0].match.room == "infra" and not scoped[0].matches(default)


async def _sub(inbox: Inbox, session: str, at: float, room: str) -> str:
    rec, _ = await inbox.submit(parse_submission(request_body(session)), at, 600, room=room)
    return rec.id


async def test_listing_and_marks_are_per_room(sqlite_inbox: Inbox) -> None:
    a = await _sub(sqlite_inbox, "a", 1.0, "default")
    b = await _sub(sqlite_inbox, "b", 2.0, "infra")
    assert [r.id for r in await sqlite_inbox.pending(room="infra")] == [b]
    assert [r.id for r in await sqlite_inbox.pending(room="default")] == [a]
    assert (await sqlite_inbox.get(b)).room == "infra"  # type: ignore[union-attr]
    # a prompt posted in infra, then a plain answer in default: infra's posting is not above it
    await sqlite_inbox.place("$pb", "posted", b, room="infra")
    await sqlite_inbox.place("$pa", "posted", a, room="default")
    pos = await sqlite_inbox.place("$ans", "answer", room="default")
    bound = timeline.bind(await sqlite_inbox.marks_before(pos, "default"), pos)
    assert isinstance(bound, timeline.Bound) and bound.request_id == a
    # the other way round: infra's only prompt, and a default-room posting after it changes nothing there
    pos = await sqlite_inbox.place("$ans2", "answer", room="infra")
    bound = timeline.bind(await sqlite_inbox.marks_before(pos, "infra"), pos)
    assert isinstance(bound, timeline.Bound) and bound.request_id == b


async def test_an_older_state_folder_s_records_belong_to_the_default_room(tmp_path: Path) -> None:
    path = tmp_path / "inbox.sqlite3"
    inbox = Inbox(path)
    await inbox.open()
    rid = await _sub(inbox, "old", 1.0, "default")
    await inbox.close()
    db = sqlite3.connect(path)  # as version 9 left it: no room columns
    db.execute("ALTER TABLE requests DROP COLUMN room")
    db.execute("DROP INDEX timeline_room")
    db.execute("ALTER TABLE timeline DROP COLUMN room")
    db.execute("PRAGMA user_version = 9")
    db.execute("UPDATE schema_versions SET version = 9 WHERE name = 'inbox'")
    db.commit()
    db.close()
    inbox = Inbox(path)
    await inbox.open()
    try:
        rec = await inbox.get(rid)
        assert rec is not None and rec.room == "default" and rec.to_api()["room"] == "default"
    finally:
        await inbox.close()
