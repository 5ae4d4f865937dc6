"""doctor's parts in-process: the inbox read without writing, power maths from bot/matrix/room, the HTTP helper."""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli.doctor.state import read_saved
from bot.config import Config, load_config
from bot.inbox.db import DatabaseError
from bot.inbox.store import Inbox
from bot.matrix.client import SESSION_KEY
from bot.matrix.identities import PIN_KEY
from bot.matrix.room import RoomState
from bot.util import jsonhttp


def _config(tmp_path: Path) -> Config:
    p = tmp_path / "c.toml"
    p.write_text(f"""
[matrix]
homeserver = "http://127.0.0.1:9"
user_id = "@bot:x"
password = "pw"
room = "!r:x"
[answerers]
users = ["@alice:x"]
[state]
path = "{tmp_path / 'state'}"
""")
    return load_config(str(p))


async def test_saved_state_is_read_through_the_inbox_without_writing(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    assert (await asyncio.to_thread(read_saved, cfg)).session is None
    assert not (tmp_path / "state").exists()  # nothing made
    inbox = Inbox(cfg.state_dir / "inbox.sqlite3")
    await inbox.open()
    await inbox.set_json(SESSION_KEY, {"user_id": "@bot:x", "device_id": "DEV", "access_token": "tok"})
    await inbox.set_json(PIN_KEY + "@alice:x", {"master": "KEY"})
    await inbox.set_kv(PIN_KEY + "@bad:x", "not json")
    await inbox.set_json(PIN_KEY + "@bob:x", {"master": None, "seen_without": True})
    await inbox.set_json(PIN_KEY + "@dan:x", {"master": None, "seen_without": True, "devices": {"D": "ed"}})
    await inbox.close()
    before = {p.name: p.stat().st_mtime_ns for p in cfg.state_dir.iterdir()}
    saved = await asyncio.to_thread(read_saved, cfg)
    assert saved.session == {"user_id": "@bot:x", "device_id": "DEV", "access_token": "tok"}
    assert saved.pins == {"@alice:x": "KEY", "@bob:x": "", "@dan:x": ""}  # bob, dan: seen without an identity
    assert saved.known == {"@bob:x": {}, "@dan:x": {"D": "ed"}}  # the devices recorded then (bob: before they were)
    assert {p.name: p.stat().st_mtime_ns for p in cfg.state_dir.iterdir() if p.name in before} == before


async def test_a_session_of_another_bot_is_not_used(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    inbox = Inbox(cfg.state_dir / "inbox.sqlite3")
    await inbox.open()
    await inbox.set_json(SESSION_KEY, {"user_id": "@other:x", "device_id": "D", "access_token": "t"})
    await inbox.close()
    assert (await asyncio.to_thread(read_saved, cfg)).session is None


def test_power_needed_reads_the_event_level_else_events_default() -> None:
    rs = RoomState()
    rs.apply({"type": "m.room.power_levels", "state_key": "", "content": {
        "events": {"m.reaction": 10}, "events_default": 5, "users": {"@a:x": 50}}})
    assert rs.power_needed("m.reaction") == 10 and rs.power_needed("m.room.message") == 5
    assert RoomState().power_needed("m.room.message") == 0


def test_a_bot_without_the_power_for_the_checkpoint_state_event_is_warned(tmp_path: Path) -> None:
    from bot.cli.doctor.report import Report
    from bot.cli.doctor.room import _check_power
    from bot.events.checkpoints import CHECKPOINT_TYPE

    cfg = _config(tmp_path)
    rs = RoomState()
    rs.apply({"type": "m.room.power_levels", "state_key": "", "content": {"users": {"@h:x": 100}}})
    assert rs.state_power_needed(CHECKPOINT_TYPE) == 50 and RoomState().state_power_needed(CHECKPOINT_TYPE) == 0
    rep = Report()
    _check_power(cfg, rs, rep)
    assert not rep.failed and rep.lines[-1].startswith("WARN room power: the bot has 0, below the 50 a ledger "
                                                       f"checkpoint ({CHECKPOINT_TYPE} state event) needs")
    rs.apply({"type": "m.room.power_levels", "state_key": "", "content": {"events": {CHECKPOINT_TYPE: 0}}})
    rep = Report()
    _check_power(cfg, rs, rep)
    assert [x[:4] for x in rep.lines] == ["ok  "]


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = {"/json": b'{"a": 1}', "/text": b"plain", "/empty": b""}.get(self.path, b'{"errcode": "M_X"}')
        self.send_response(200 if self.path != "/missing" else 404)
        self.end_headers()
        self.wfile.write(body)
        self.server.seen = self.headers.get("Authorization")  # type: ignore[attr-defined]

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def server() -> Iterator[http.server.HTTPServer]:
    srv = http.server.HTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()


def test_jsonhttp_answers_any_status_and_says_when_nothing_answers(server: http.server.HTTPServer,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(os.environ, "http_proxy", "http://127.0.0.1:9")  # loopback never goes through it
    base = f"http://127.0.0.1:{server.server_address[1]}"
    assert jsonhttp.call("GET", base + "/json", token="t") == (200, {"a": 1})
    assert server.seen == "Bearer t"  # type: ignore[attr-defined]
    assert jsonhttp.call("GET", base + "/text") == (200, "plain")
    assert jsonhttp.ok("GET", base + "/empty") == {}
    assert jsonhttp.call("GET", base + "/missing") == (404, {"errcode": "M_X"})
    with pytest.raises(jsonhttp.HTTPStatusError) as e:
        jsonhttp.ok("GET", base + "/missing")
    assert e.value.status == 404
    server.shutdown()
    server.server_close()
    with pytest.raises(jsonhttp.Unreachable) as u:
        jsonhttp.call("GET", base + "/json", timeout=2)
    assert u.value.reason == "connection refused"
    assert json.dumps(jsonhttp.quote("!a:b/c")) == '"%21a%3Ab%2Fc"'


async def test_a_read_only_inbox_refuses_writes(tmp_path: Path) -> None:
    inbox = Inbox(tmp_path / "inbox.sqlite3")
    await inbox.open()
    await inbox.set_kv("k", "v")
    await inbox.close()
    ro = Inbox(tmp_path / "inbox.sqlite3")
    await ro.open_read_only()
    try:
        assert await ro.get_kv("k") == "v"
        with pytest.raises(DatabaseError, match="not open to write"):
            await ro.set_kv("k", "changed")
    finally:
        await ro.close()


def test_a_rooms_entry_advice_names_its_own_keys() -> None:
    from bot.cli.doctor import Marked
    from bot.cli.doctor.report import Report

    rep = Report()
    marked = Marked(parent=rep, name="infra", index=1)
    marked.fail("room: the alias #x:hs does not resolve (404 M_NOT_FOUND)", "fix matrix.room")
    marked.fail("answerers: @nobody:hs does not exist (404)", "fix answerers.users")
    assert rep.failed and rep.lines == [
        "FAIL [infra] room: the alias #x:hs does not resolve (404 M_NOT_FOUND) -> fix rooms.1.room",
        "FAIL [infra] answerers: @nobody:hs does not exist (404) -> fix rooms.1.answerers.users",
    ]


@pytest.mark.parametrize(
    ("admin", "daemon", "expect"),
    [
        ((200, {}), (0, None), "WARN rate limit: @bot:x has no override_ratelimit"),
        ((200, {"messages_per_second": 0, "burst_count": 0}), (0, None), "ok   rate limit: @bot:x is exempt"),
        ((200, {"messages_per_second": 1, "burst_count": 5}), (0, None), "WARN rate limit: @bot:x has its own limit"),
        ((403, {"errcode": "M_FORBIDDEN"}), (200, {"rate_limit": {"limited": True, "now": {"refusals": 2}}}),
         "WARN rate limit: the running daemon is rate-limited by the homeserver now (2 refusals"),
        ((403, {"errcode": "M_FORBIDDEN"}), (200, {"rate_limit": {"limited": False, "limits": 1, "refusals": 4}}),
         "WARN rate limit: the running daemon was rate-limited 1 time(s)"),
        ((403, {"errcode": "M_FORBIDDEN"}), (200, {"rate_limit": {"limited": False, "refusals": 0}}),
         "ok   rate limit: the running daemon has not been refused for rate"),
        ((404, {"errcode": "M_UNRECOGNIZED"}), (0, None), "ok   rate limit: not measured"),
    ],
)
def test_doctor_says_what_it_can_tell_of_the_rate_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, admin: tuple[int, object], daemon: tuple[int, object],
    expect: str,
) -> None:
    from bot.cli.doctor import ratelimit
    from bot.cli.doctor.homeserver import Login
    from bot.cli.doctor.report import Report

    asked: list[str] = []

    def call(cfg: Config, method: str, path: str, body: object = None, token: str | None = None) -> object:
        asked.append(path)
        return admin

    monkeypatch.setattr(ratelimit, "call", call)
    monkeypatch.setattr(ratelimit, "daemon_health", lambda cfg: daemon)
    rep = Report()
    ratelimit.check_rate_limit(_config(tmp_path), Login("tok", temporary=False), rep)
    assert asked == ["/_synapse/admin/v1/users/%40bot%3Ax/override_ratelimit"]
    assert len(rep.lines) == 1 and rep.lines[0].startswith(expect), rep.lines
    if not expect.startswith("ok   rate limit: @bot:x is exempt") and "has not been" not in expect:
        assert "override_ratelimit" in rep.lines[0]
