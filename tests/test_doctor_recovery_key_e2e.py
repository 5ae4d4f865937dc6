"""`doctor` and `run` tell the same story about the bot's identity on a fresh state folder (real Synapse):
without the recovery key both say it is needed; with it (in the file or the environment) doctor says the bot
imports it, and `run` does; a wrong key fails in both. Also: doctor names where the password came from."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.config import ENV_PASSWORD, ENV_RECOVERY_KEY
from bot.demo.homeserver import Homeserver
from tests.support.e2e_human import E2EStation
from tests.support.station import BOT_PASSWORD, exe_path
from tests.test_cross_signing import encode_recovery_key

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
async def enc(homeserver: Homeserver, workdir: Path) -> AsyncIterator[E2EStation]:
    st = E2EStation(homeserver, workdir / "doctor-rk", "drk")
    await st.setup()
    yield st
    await st.teardown()


def doctor(config: str, path: Path, **env: str) -> list[str]:
    path.write_text(config)
    p = subprocess.run([exe_path(), "doctor", "--config", str(path)], capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL, env={**os.environ, **env})
    assert "Traceback" not in p.stdout + p.stderr, p.stdout + p.stderr
    return p.stdout.splitlines()


def identity(lines: list[str]) -> str:
    hits = [x for x in lines if x.startswith(("ok   identity:", "FAIL identity:"))]
    assert len(hits) == 1, "\n".join(lines)
    return hits[0]


async def test_doctor_says_what_run_does_with_the_recovery_key(enc: E2EStation) -> None:
    key = (enc.state_dir / "recovery-key.txt").read_text().strip()
    enc.stop_daemon()
    shutil.rmtree(enc.state_dir)  # a fresh state folder: the identity is only in secret storage now
    other = enc.dir / "doctor.toml"
    line = identity(await asyncio.to_thread(doctor, enc.config_text(), other))
    assert line.startswith("FAIL identity:") and "matrix.recovery_key" in line
    line = identity(await asyncio.to_thread(doctor, enc.config_text(), other, **{ENV_RECOVERY_KEY: key}))
    assert line.startswith("ok   identity:") and "imports it" in line and f"env {ENV_RECOVERY_KEY}" in line, line
    with_key = enc.config_text(recovery_key=f'"{key}"')
    line = identity(await asyncio.to_thread(doctor, with_key, other))
    assert line.startswith("ok   identity:") and "imports it" in line and "matrix.recovery_key" in line, line
    wrong = encode_recovery_key(os.urandom(32))
    line = identity(await asyncio.to_thread(doctor, enc.config_text(recovery_key=f'"{wrong}"'), other))
    assert line.startswith("FAIL identity:") and "does not open" in line and wrong not in line, line
    assert not enc.state_dir.exists() or not (enc.state_dir / "cross_signing.json").exists()  # doctor saves nothing
    no_password = with_key.replace(f'password = "{BOT_PASSWORD}"\n', "")
    lines = await asyncio.to_thread(doctor, no_password, other, **{ENV_PASSWORD: BOT_PASSWORD})
    assert [x for x in lines if x.startswith("ok   login:") and f"logs in with env {ENV_PASSWORD}" in x], lines
    enc.config_path.write_text(with_key)  # and run does what doctor said
    enc.start_daemon()
    await enc.wait_healthy()
    assert "cross_signing_imported" in enc.log_text()
