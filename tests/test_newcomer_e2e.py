"""The copy-paste examples a newcomer tries, as the docs print them, against the real daemon and Synapse:
docs/api.md's `POST /permissions` body, docs/questions.md's `AskUserQuestion` hook input through
`permission-bot hook claude-code` (answered with `permissions answer` and a unique id prefix), and
`permissions submit --wait` (a request from the command line)."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.human import content
from tests.support.station import AGENT_TOKEN, DECIDER_TOKEN, Station
from tests.test_hooks_e2e import finish, start_hook

pytestmark = pytest.mark.e2e
DOCS = Path(__file__).parent.parent / "docs"


def json_blocks(doc: str) -> list[Any]:
    """Every ```json block of ``doc`` that parses (some show fragments)."""
    out = []
    for block in re.findall(r"```json\n(.*?)\n```", (DOCS / doc).read_text(), re.S):
        try:
            out.append(json.loads(block))
        except ValueError:
            continue
    return out


async def test_the_api_docs_request_body_is_accepted_and_posted(station: Station, sid: str) -> None:
    body = next(b for b in json_blocks("api.md") if isinstance(b, dict) and "toolCall" in b)
    body["sessionId"] = sid  # the doc's "try-1", made unique in the shared station
    rec = await station.post(body, token=AGENT_TOKEN[1])
    assert rec["id"] == f"{sid}:1" and rec["label"] == body["label"] and rec["state"] == "pending"
    prompt = await station.prompt_for(sid)
    assert prompt and "npm test" in content(prompt)["body"]
    await station.drain()


async def test_the_questions_docs_hook_input_is_asked_and_answered_by_an_id_prefix(station: Station) -> None:
    data = next(b for b in json_blocks("questions.md") if isinstance(b, dict) and "hook_event_name" in b)
    session = str(uuid.uuid4())  # as Claude Code's session ids are
    data["session_id"] = session
    proc = await start_hook(station, data)
    prompt = await station.prompt_for(session)
    assert prompt and "Which database should we use?" in content(prompt)["body"]
    env = {"PERMISSION_BOT_TOKEN": DECIDER_TOKEN[1]}
    done = await asyncio.to_thread(station.cli, "permissions", "answer", session[:8], "1", env=env)
    assert done.returncode == 0 and f"answered {session}:1: Postgres" in done.stdout, done.stderr
    code, out, _ = await finish(proc)
    assert code == 0
    assert out["hookSpecificOutput"]["decision"]["updatedInput"]["answers"] == {
        "Which database should we use?": "Postgres"
    }


async def test_permissions_submit_waits_for_the_answer(station: Station, sid: str) -> None:
    await station.drain()
    args = [station.exe, "permissions", "submit", "--title", "Try the setup", "--command", "echo hello",
            "--session", sid, "--wait"]
    env = {"PERMISSION_BOT_URL": station.api_url, "PERMISSION_BOT_TOKEN": AGENT_TOKEN[1], "PATH": "/usr/bin:/bin"}
    proc = await asyncio.create_subprocess_exec(*args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    prompt = await station.prompt_for(sid)
    assert prompt and "echo hello" in content(prompt)["body"]
    await station.alice.text("1", reply_to=prompt["event_id"])
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err
    assert f"{sid}:1" in out.decode() and "alice" in out.decode(), out
