"""`permission-bot doctor` against the test Synapse: the running station, a fresh bot, broken configs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.demo.homeserver import Homeserver, free_port, http
from tests.support import forkserver
from tests.support.station import BOT_PASSWORD, TOKEN, Station

LAB_PASSWORD = "doctor-bot-password-77aa"
HUMAN_PASSWORD = "doctor-human-password-41bd"


def doctor(config: Path | str, timeout: float = 60) -> tuple[int, list[str], str]:
    """Run the command (bot.cli.main.entry, forked from the worker's fork server: tests/support/forkserver.py);
    (exit code, stdout lines, all output)."""
    p = forkserver.run(["doctor", "--config", str(config)], timeout=timeout)
    return p.returncode, p.stdout.splitlines(), p.stdout + p.stderr


def line(lines: list[str], prefix: str, contains: str = "") -> str:
    """The first line starting with ``prefix`` that contains ``contains``."""
    hits = [x for x in lines if x.startswith(prefix) and contains in x]
    assert hits, f"no {prefix!r} line containing {contains!r} in:\n" + "\n".join(lines)
    return hits[0]


def well_formed(lines: list[str]) -> None:
    assert lines
    for x in lines:
        assert x.startswith(("ok   ", "WARN ", "FAIL ")), x
        if x.startswith("FAIL "):
            assert " -> " in x, f"a FAIL line must say what to do: {x}"


# --- the running station: saved session, joined room, running daemon ---------------------------------


@pytest.mark.e2e
async def test_station_config_is_all_ok(station: Station) -> None:
    code, lines, out = await asyncio.to_thread(doctor, station.config_path)
    well_formed(lines)
    assert code == 0, out
    assert not [x for x in lines if x.startswith("FAIL")], out
    line(lines, "ok   config:", str(station.config_path))
    line(lines, "ok   homeserver:", station.hs.url)
    line(lines, "ok   login:", "saved session")  # the daemon's own device: no new one
    line(lines, "ok   room:", f"joined to {station.room_id}")
    line(lines, "ok   room power:")
    line(lines, "ok   room encryption: off")
    line(lines, "ok   encryption: device")  # the daemon's device, from its state
    line(lines, "ok   answerers:", f"{station.alice.user_id} exists, has joined")
    line(lines, "ok   api:", "served by a running permission-bot daemon")
    for secret in (BOT_PASSWORD, TOKEN, saved_token(station.state_dir)):
        assert secret not in out


def saved_token(state_dir: Path) -> str:
    with sqlite3.connect(str(state_dir / "inbox.sqlite3")) as db:
        row = db.execute("SELECT v FROM kv WHERE k='matrix.session'").fetchone()
    return str(json.loads(row[0])["access_token"])


# --- a bot of its own (no daemon): password login, rooms joined / invited / unknown -------------------


@dataclass
class Lab:
    hs: Homeserver
    dir: Path
    bot_id: str
    bot_token: str
    human_id: str
    human_token: str
    room_id: str

    def config(self, name: str, extra_matrix: str = "", **over: str) -> Path:
        values = {
            "homeserver": f'"{self.hs.url}"',
            "user_id": f'"{self.bot_id}"',
            "password": f'"{LAB_PASSWORD}"',
            "room": f'"{self.room_id}"',
            "users": f'["{self.human_id}"]',
            "listen": f'"127.0.0.1:{free_port()}"',
            "token": '"doctor-api-token-0c9e"',
            "path": f'"{self.dir / name / "state"}"',
        }
        values.update(over)
        text = "\n".join(
            [
                "[matrix]",
                *(f"{k} = {values[k]}" for k in ("homeserver", "user_id", "password", "room")),
                extra_matrix,
                "[answerers]",
                f"users = {values['users']}",
                "[api]",
                f"listen = {values['listen']}",
                f"token = {values['token']}",
                "[state]",
                f"path = {values['path']}",
            ]
        )
        path = self.dir / f"{name}.toml"
        path.write_text(text + "\n")
        return path

    def devices(self) -> list[str]:
        r = http("GET", self.hs.url + "/_matrix/client/v3/devices", token=self.bot_token)
        return sorted(d["device_id"] for d in r["devices"])


@pytest.fixture(scope="module")
def lab(homeserver: Homeserver, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    bot = homeserver.register("doctorbot", LAB_PASSWORD)
    human = homeserver.register("doctorhuman", HUMAN_PASSWORD)
    room = homeserver.create_room(human["access_token"], invite=[bot["user_id"]], name="doctor")
    homeserver.join(bot["access_token"], room)
    yield Lab(
        homeserver,
        tmp_path_factory.mktemp("doctor"),
        bot["user_id"],
        bot["access_token"],
        human["user_id"],
        human["access_token"],
        room,
    )


@pytest.mark.e2e
def test_password_login_is_ok_and_leaves_no_device(lab: Lab) -> None:
    before = lab.devices()
    code, lines, out = doctor(lab.config("fresh"))
    well_formed(lines)
    assert code == 0, out
    line(lines, "ok   login:", "logged out again")
    line(lines, "ok   room:", f"joined to {lab.room_id}")
    line(lines, "ok   answerers:", lab.human_id)
    line(lines, "ok   api:", "free")
    line(lines, "ok   state:", "created on first start")
    line(lines, "ok   encryption: supported")
    assert lab.devices() == before, "doctor left a device behind"
    assert LAB_PASSWORD not in out and "doctor-api-token-0c9e" not in out


@pytest.mark.e2e
def test_wrong_password_fails(lab: Lab) -> None:
    code, lines, out = doctor(lab.config("wrongpw", password='"not-the-password"'))
    well_formed(lines)
    assert code == 1, out
    fail = line(lines, "FAIL login:", lab.bot_id)
    assert "matrix.password" in fail.split(" -> ")[1]
    assert "not-the-password" not in out


@pytest.mark.e2e
def test_unknown_room_fails(lab: Lab) -> None:
    before = lab.devices()
    code, lines, out = doctor(lab.config("noroom", room='"!nosuchroom:localhost"'))
    well_formed(lines)
    assert code == 1, out
    assert "invite" in line(lines, "FAIL room:", "!nosuchroom:localhost")
    assert lab.devices() == before


@pytest.mark.e2e
def test_unknown_alias_fails(lab: Lab) -> None:
    code, lines, out = doctor(lab.config("noalias", room='"#nowhere:localhost"'))
    well_formed(lines)
    assert code == 1, out
    line(lines, "FAIL room:", "#nowhere:localhost does not resolve")


@pytest.mark.e2e
def test_unknown_answerer_fails(lab: Lab) -> None:
    code, lines, out = doctor(lab.config("nobody", users='["@nobody-here:localhost"]'))
    well_formed(lines)
    assert code == 1, out
    line(lines, "FAIL answerers:", "@nobody-here:localhost does not exist")
    line(lines, "FAIL answerers:", "nobody in the room can answer")


@pytest.mark.e2e
def test_invited_into_an_encrypted_room(lab: Lab) -> None:
    room = lab.hs.create_room(lab.human_token, invite=[lab.bot_id], encrypted=True, name="secret")
    code, lines, out = doctor(lab.config("encrypted", room=f'"{room}"'))
    well_formed(lines)
    assert code == 0, out
    line(lines, "ok   room:", "invited")
    line(lines, "ok   room encryption: on", "trust cross-signed")
    line(lines, "ok   room power levels:", "once the bot has joined")
    # the same room with encryption turned off: the bot would refuse it
    code, lines, out = doctor(lab.config("encrypted-off", extra_matrix="encryption = false", room=f'"{room}"'))
    well_formed(lines)
    assert code == 1, out
    assert "encryption = true" in line(lines, "FAIL room encryption: on", "encryption = false")


@pytest.mark.e2e
def test_api_address_taken_by_something_else(lab: Lab) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        code, lines, out = doctor(lab.config("taken", listen=f'"127.0.0.1:{port}"'))
        s.setblocking(False)
        asked = 0
        with contextlib.suppress(BlockingIOError):
            while True:
                s.accept()[0].close()
                asked += 1
    well_formed(lines)
    assert code == 1, out
    assert "api.listen" in line(lines, "FAIL api:", "taken")
    assert asked == 1, asked  # a port that never answers is asked once (its timeout waited once), not per check


# --- no homeserver needed -------------------------------------------------------------------------------


def test_bad_config_names_the_key(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[matrix]\nhomeserver = "http://127.0.0.1:1"\nuser_id = "@b:x"\npassword = "pw-9f8e"\n')
    code, lines, out = doctor(cfg)
    well_formed(lines)
    assert code == 1
    assert lines == [line(lines, "FAIL config:", "matrix.room: required")]
    assert "pw-9f8e" not in out


def test_bad_type_and_missing_file(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[matrix]\nhomeserver = "http://x"\nuser_id = "@b:x"\npassword = "p"\nroom = 5\n')
    code, lines, _ = doctor(cfg)
    assert code == 1 and line(lines, "FAIL config:", "matrix.room")
    code, lines, _ = doctor(tmp_path / "missing.toml")
    assert code == 1 and line(lines, "FAIL config:", "no such config file")


def test_unreachable_homeserver(tmp_path: Path) -> None:
    port = free_port()
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[matrix]\nhomeserver = "http://127.0.0.1:{port}"\nuser_id = "@b:x"\npassword = "p"\nroom = "!r:x"\n'
        f'[answerers]\nusers = ["@a:x"]\n[api]\nlisten = "127.0.0.1:{free_port()}"\ntoken = "t"\n'
        f'[state]\npath = "{tmp_path / "state"}"\n'
    )
    code, lines, out = doctor(cfg)
    well_formed(lines)
    assert code == 1, out
    assert "matrix.homeserver" in line(lines, "FAIL homeserver:", f"127.0.0.1:{port}")
    line(lines, "ok   api:")  # the checks that do not need the homeserver still run


def test_no_answerers_and_no_token_warn_or_fail(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[matrix]\nhomeserver = "http://127.0.0.1:{free_port()}"\nuser_id = "@b:x"\npassword = "p"\n'
        f'room = "!r:x"\n[state]\npath = "{tmp_path}"\n[api]\nlisten = "127.0.0.1:{free_port()}"\n'
    )
    _, lines, _ = doctor(cfg)
    line(lines, "WARN api.token:")
    line(lines, "FAIL answerers:", "nobody may answer")


def test_runs_as_python_module(tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "bot", "doctor", "--config", str(tmp_path / "none.toml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 1 and p.stdout.startswith("FAIL config:")
