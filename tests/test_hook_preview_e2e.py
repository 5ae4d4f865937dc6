"""A Write's preview never posts a secret file: `permission-bot hook` against the real daemon and Synapse.

The model names the path of a Write; the hook used to read that file for the diff, so an SSH key,
a decider's token file or /proc/self/environ landed in the room and in records every agent token
reads. Now only an ordinary file inside the session's cwd shows its content; the others show
their path, size and SHA-256 (never for /proc) and why no content is shown."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.support.human import content
from tests.support.station import AGENT_B_TOKEN, AGENT_TOKEN, DECIDER_TOKEN, Station
from tests.test_hooks_e2e import FIX, finish

pytestmark = pytest.mark.e2e

AGENT, DECIDER = AGENT_TOKEN[1], DECIDER_TOKEN[1]
SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA-SSH-SECRET-7d1c\n"
DOTENV = "DATABASE_PASSWORD=dotenv-secret-4a9e\n"


def _write_input(sid: str, cwd: Path, path: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIX / "claude-code-PermissionRequest-Write.json").read_text()
                                      .replace("<cwd>", str(cwd)))
    data["session_id"] = sid
    data["tool_input"] = {"file_path": path, "content": "replaced\n"}
    return data


async def _hook(station: Station, data: dict[str, Any], *flags: str, env: dict[str, str] | None = None
                ) -> asyncio.subprocess.Process:
    e = dict(os.environ, PERMISSION_BOT_URL=station.api_url, **(env or {"PERMISSION_BOT_TOKEN": AGENT}))
    proc = await asyncio.create_subprocess_exec(
        station.exe, "hook", "claude-code", *flags, env=e,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(data).encode())
    proc.stdin.close()
    return proc


async def _shown(station: Station, sid: str, proc: asyncio.subprocess.Process) -> tuple[str, str]:
    """(the prompt's whole content, the record as any agent token reads it); then denies, and the hook ends."""
    prompt = await station.prompt_for(sid)
    assert prompt, "no prompt"
    rid = f"{sid}:1"
    st, rec = await station.ahttp("GET", f"/permissions/{rid}", token=AGENT_B_TOKEN[1])
    assert st == 200
    st, _ = await station.ahttp("POST", f"/permissions/{rid}", {"decision": "deny"}, token=DECIDER)
    assert st == 200
    code, out, _ = await finish(proc)
    assert code == 0 and out["hookSpecificOutput"]["decision"]["behavior"] == "deny"
    return json.dumps(content(prompt), ensure_ascii=False), json.dumps(rec, ensure_ascii=False)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """A session's cwd (proj) with a .env, a symlink out to an SSH key, and a decider token file outside."""
    proj, home = tmp_path / "proj", tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    proj.mkdir()
    (home / ".ssh" / "id_ed25519").write_text(SSH_KEY)
    (home / "alice-cli").write_text(DECIDER + "\n")  # a decider's token file, under an innocent name
    (proj / ".env").write_text(DOTENV)
    (proj / "notes.md").symlink_to(home / ".ssh" / "id_ed25519")
    (proj / "hook-auth").write_text(AGENT + "\n")  # the hook's own --token-file, inside cwd
    (proj / "app.py").write_text("print('old line')\n")
    return {"proj": proj, "home": home}


@pytest.mark.parametrize(
    ("where", "secret", "why"),
    [
        ("home/.ssh/id_ed25519", SSH_KEY, "outside the session's working directory"),
        ("home/alice-cli", DECIDER + "\n", "outside the session's working directory"),
        ("proj/notes.md", SSH_KEY, "through a symlink"),
        ("proj/.env", DOTENV, "looks like a secret (.env*)"),
        ("proj/hook-auth", AGENT + "\n", "the bot's token file"),
    ],
)
async def test_a_secret_file_shows_path_size_and_hash_never_content(
    station: Station, sid: str, tree: dict[str, Path], where: str, secret: str, why: str
) -> None:
    path = str(tree["proj"].parent / where)
    token_file = str(tree["proj"] / "hook-auth")
    proc = await _hook(station, _write_input(sid, tree["proj"], path), "--token-file", token_file, env={})
    prompt, record = await _shown(station, sid, proc)
    for shown in (prompt, record):
        assert secret.strip() not in shown and secret.strip()[-12:] not in shown
        assert path in shown and why in shown and _sha(secret) in shown and f"{len(secret)} bytes" in shown, shown
        assert "replaced" in shown  # the new content is still shown


async def test_proc_self_environ_is_never_read(station: Station, sid: str, tmp_path: Path) -> None:
    proc = await _hook(station, _write_input(sid, tmp_path, "/proc/self/environ"))
    prompt, record = await _shown(station, sid, proc)
    for shown in (prompt, record):
        assert AGENT not in shown and "PERMISSION_BOT" not in shown
        assert "/proc/self/environ" in shown and "/proc, /sys or /dev" in shown and "SHA-256" not in shown


async def test_an_ordinary_file_in_cwd_still_gets_its_diff(station: Station, sid: str, tree: dict[str, Path]) -> None:
    proc = await _hook(station, _write_input(sid, tree["proj"], str(tree["proj"] / "app.py")))
    prompt, _ = await _shown(station, sid, proc)
    assert "-print('old line')" in prompt and "+replaced" in prompt and "not shown" not in prompt
