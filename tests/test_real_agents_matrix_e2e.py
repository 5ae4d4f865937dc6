"""Every agent people use, for real, behind ``permission-bot acp`` in a real room: Codex (codex-acp), Gemini CLI,
Qwen Code, OpenCode and GitHub Copilot CLI, pinned in ``tests/agents-npm``, offline against
``tests.support.model_api``, each started as docs/agents.md says (``tests.support.agent_setups``).

One agent process per agent, one session, its turns one after another, each answered by number in the room:
a command allowed once (option 1, whatever the agent's own order) runs; a command denied does not, and the model
gets the agent's rejection; a file write allowed once is written, one denied is not; "always" lets the same
command run again unasked; ``session/cancel`` cancels a pending request and nothing runs. None of these agents
sends ``$/cancel_request`` (only Claude's ACP adapter does: tests/test_acp_e2e.py covers it).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.support.agent_setups import SETUPS, Setup
from tests.support.model_api import ModelApi
from tests.support.scripted_model import scripted
from tests.test_acp_e2e import record
from tests.test_real_agents_e2e import Run, check_event, model_api  # noqa: F401 (the fixture)

REQUIRED = os.environ.get("PB_REAL_AGENTS") == "required"
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not SETUPS["qwen"].exe.exists() and not REQUIRED, reason="tests/agents-npm not installed"),
]
WAIT = 180  # a real agent on a loaded machine: its first request may take a while


def _turns(s: Setup, work: Path) -> list[str]:
    """The user's turns, each a script for the model (see the module docstring for what each checks)."""
    return [
        scripted([s.shell("echo once >> shell.log")]),
        scripted([s.shell("echo denied >> shell.log")]),
        scripted([s.write(work / "written.txt", "written")]),
        scripted([s.write(work / "refused.txt", "refused")]),
        scripted([s.shell("echo always >> always.log"), s.shell("echo always >> always.log")]),
        scripted([s.shell("touch cancelled.flag")]),  # not "echo": "always" may cover every echo
    ]


async def _prompt(station: Any, run: Run, seen: list[str], word: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The next prompt posted for this run's session (its event, its record), which must be about ``word``."""
    sid = await run.client.session_id(WAIT)

    def pred(e: dict[str, Any]) -> bool:
        c = e.get("content") or {}
        return (
            e.get("sender") == station.bot_id
            and c.get("suite_event_type") == "dev.agentpod.permission.v2"
            and (c.get("m.relates_to") or {}).get("rel_type") != "m.replace"
            and c.get("session_id") == sid
            and e.get("event_id") not in seen
        )

    p = await station.alice.wait(pred, WAIT)
    assert p, f"no prompt about {word!r}; stderr:\n{run.client.stderr()[-4000:]}"
    seen.append(p["event_id"])
    await check_event(station, p["content"])
    rec = await record(station, p["content"]["request_id"])
    assert word in json.dumps(rec["params"]), (word, rec["params"])
    return p, rec


def _number(p: dict[str, Any], rec: dict[str, Any], kind: str) -> str:
    """The number shown for the agent's first option of this kind."""
    agent_id = next(o["optionId"] for o in rec["params"]["options"] if o["kind"] == kind)
    return str([o["id"] for o in p["content"]["options"]].index(agent_id) + 1)


async def _answer(station: Any, run: Run, seen: list[str], word: str, kind: str) -> dict[str, Any]:
    """Answer the next prompt (about ``word``) with the number of ``kind``; the settled record."""
    p, rec = await _prompt(station, run, seen, word)
    number = "1" if kind == "allow_once" else _number(p, rec, kind)
    await station.alice.text(number, reply_to=p["event_id"])
    got = await _settled(station, rec["id"])
    chosen = [o["kind"] for o in rec["params"]["options"] if o["optionId"] == got["outcome"]["option_id"]]
    assert chosen == [kind], (number, rec["params"]["options"], got["outcome"])
    return got


async def _settled(station: Any, request_id: str) -> dict[str, Any]:
    for _ in range(WAIT * 10):
        got = await record(station, request_id)
        if got["state"] != "pending":
            return got
        await asyncio.sleep(0.1)
    raise AssertionError(f"{request_id} never settled")


def _codex_home() -> Path:
    """Codex refuses a CODEX_HOME under the temp dir (its sandbox helper): one under /var/tmp."""
    base = Path("/var/tmp") if Path("/var/tmp").is_dir() else Path.home()
    return Path(tempfile.mkdtemp(prefix="pb-codex-home-", dir=base))


@pytest.mark.parametrize("name", list(SETUPS))
async def test_real_agent_asks_and_does_what_was_chosen(
    station: Any, model_api: ModelApi, tmp_path: Path, name: str  # noqa: F811
) -> None:
    s = SETUPS[name]
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    if s.settings_path:  # the settings docs/agents.md gives, where it says to put them
        (home / s.settings_path).parent.mkdir(parents=True)
        (home / s.settings_path).write_text(s.settings_text)
    if name == "codex":
        assert shutil.which("bwrap"), "Codex's sandbox needs bwrap on PATH (Debian package bubblewrap)"
    own = _codex_home() if name == "codex" else home
    args, env = s.offline(model_api.url, own)
    cmd = [str(s.exe), *s.command[1:], *args]
    run = await Run.start(station, model_api, tmp_path, name, agent=(cmd, {**env, "PATH": os.environ["PATH"]}),
                          prompts=_turns(s, work))
    seen: list[str] = []
    try:
        await _answer(station, run, seen, "echo once", "allow_once")
        await _answer(station, run, seen, "echo denied", "reject_once")
        await _answer(station, run, seen, "written.txt", "allow_once")
        await _answer(station, run, seen, "refused.txt", "reject_once")
        await _answer(station, run, seen, "echo always", "allow_always")
        _p, rec = await _prompt(station, run, seen, "cancelled.flag")  # the second "always" ran unasked
        run.cancel_file.touch()
        done = await run.done(model_api, WAIT)
        got = await record(station, rec["id"])
        assert got["state"] == "cancelled" and got["outcome"]["option_id"] is None
        assert done["client_permission_requests"] == 0, done
        assert (work / "shell.log").read_text() == "once\n", "allowed once and denied did otherwise"
        assert not (work / "cancelled.flag").exists(), "cancelled, yet the command ran"
        assert (work / "written.txt").read_text().strip() == "written"
        assert not (work / "refused.txt").exists(), "a denied write was written"
        assert (work / "always.log").read_text() == "always\n" * 2
        if s.rejected is None:  # Codex: a reject ("abort") ends the turn, the model is told nothing
            assert done["stop_reasons"][1] == "cancelled" and done["stop_reasons"][3] == "cancelled", done
        else:
            # the two denied; Gemini CLI may also send the model the cancelled one's refusal
            told = sum(s.rejected in r for r in model_api.tool_results)
            assert told == 2 or (name == "gemini" and told == 3), model_api.tool_results
    finally:
        await run.client.close()
        if own != home:
            shutil.rmtree(own, ignore_errors=True)
