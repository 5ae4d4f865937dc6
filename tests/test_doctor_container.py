"""`doctor` on a correct container setup is clean: the documented container config (named tokens from
the environment, listen 0.0.0.0) with the bot invited but not joined yet, run as in the image."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from bot.cli.doctor.config import in_container
from bot.demo.homeserver import Homeserver, free_port
from tests.support.station import exe_path
from tests.test_dockerfile import filled_config

PASSWORD = "container-doctor-pw-77e1"


@pytest.mark.e2e
def test_a_correct_container_setup_has_no_warning(homeserver: Homeserver, tmp_path: Path) -> None:
    bot = homeserver.register("containerdoctor", PASSWORD)
    human = homeserver.register("containerdoctorhuman", "container-doctor-human-pw")
    room = homeserver.create_room(human["access_token"], invite=[bot["user_id"]], name="container doctor")
    port = free_port()
    config = tmp_path / "config.toml"
    config.write_text(filled_config(homeserver.url, bot["user_id"], room, human["user_id"], port, tmp_path / "data"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERMISSION_BOT_")}
    env.update(PERMISSION_BOT_MATRIX_PASSWORD=PASSWORD, PERMISSION_BOT_AGENT_TOKEN="agent-secret-0123456789",
               PERMISSION_BOT_DECIDER_TOKEN="decider-secret-0123456789", PERMISSION_BOT_IN_CONTAINER="1")
    p = subprocess.run([exe_path(), "doctor", "--config", str(config)], capture_output=True, text=True,
                       timeout=120, env=env, stdin=subprocess.DEVNULL)
    lines = p.stdout.splitlines()
    assert p.returncode == 0, p.stdout + p.stderr
    assert [x for x in lines if not x.startswith("ok   ")] == [], p.stdout
    assert any(x.startswith("ok   room power levels: checked once the bot has joined") for x in lines)
    assert any(x.startswith(f"ok   api: 0.0.0.0:{port} inside a container") for x in lines)


def test_in_container_reads_the_images_variable_and_the_engines_markers(tmp_path: Path) -> None:
    assert not in_container({}, str(tmp_path))
    assert in_container({"PERMISSION_BOT_IN_CONTAINER": "1"}, str(tmp_path))
    assert not in_container({"PERMISSION_BOT_IN_CONTAINER": "0"}, str(tmp_path))
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / ".containerenv").write_text("")  # podman
    assert in_container({}, str(tmp_path))
    (tmp_path / "run" / ".containerenv").unlink()
    (tmp_path / ".dockerenv").write_text("")  # docker
    assert in_container({}, str(tmp_path))


def test_outside_a_container_all_interfaces_still_warn(tmp_path: Path) -> None:
    from bot.cli.doctor import config as doctor_config
    from bot.cli.doctor.report import Report
    from bot.config import parse_config

    cfg = parse_config({"matrix": {"homeserver": "http://127.0.0.1:1", "user_id": "@b:x", "password": "p",
                                   "room": "!r:x"}, "api": {"listen": f"0.0.0.0:{free_port()}"}}, env={})
    rep = Report()
    doctor_config.check_listen(cfg, rep, container=False)
    assert any(x.startswith("WARN api: 0.0.0.0:") and "reachable from other machines" in x for x in rep.lines)
