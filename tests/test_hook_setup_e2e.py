"""What a user hits setting up the Claude Code hook, end to end against the real daemon and Synapse:
the printed settings pasted unchanged (only the token file put where they say), the session shortcuts
on a hook prompt, the working directory in the record, and a missing token made visible.

The hook command runs as Claude Code runs it: through ``sh -c`` in the project directory, the hook
input on stdin, with no ``PERMISSION_BOT_*`` variable. (The real Claude Code the suite pins, 2.1.44,
runs no PermissionRequest hook under plain ``-p``: it answers "This command requires approval" at
once, so the CLI itself cannot drive this path here; FACTS.md describes 2.1.332, which does.)
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
from pathlib import Path
from typing import Any

import pytest

from tests.support.human import content
from tests.support.station import AGENT_TOKEN, Station
from tests.test_hooks_e2e import finish, hook_input, start_hook

pytestmark = pytest.mark.e2e


def printed_settings(station: Station, home: Path) -> tuple[dict[str, Any], str]:
    """``print-config claude-code`` as a user on this machine runs it: (the JSON, the stderr note)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERMISSION_BOT_")}
    env.pop("XDG_CONFIG_HOME", None)
    p = station.cli("hook", "print-config", "claude-code", "--url", station.api_url, "--prompt-timeout", "60s",
                    env={**env, "HOME": str(home)})
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout), p.stderr


async def run_like_claude(
    station: Station, command: str, project: Path, home: Path, data: Any, path: str | None = None
) -> Any:
    """``path``: Claude Code's PATH (default: the virtualenv's bin first)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERMISSION_BOT_")}
    env.pop("XDG_CONFIG_HOME", None)
    env.update(HOME=str(home), CLAUDE_PROJECT_DIR=str(project),
               PATH=path or f"{Path(station.exe).parent}{os.pathsep}{env.get('PATH', '')}")
    proc = await asyncio.create_subprocess_exec(
        "sh", "-c", command, cwd=project, env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(data).encode())
    proc.stdin.close()
    return proc


async def test_printed_settings_pasted_unchanged_work(station: Station, sid: str, tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "proj"
    home.mkdir()
    (project / ".claude").mkdir(parents=True)
    settings, note = printed_settings(station, home)
    (project / ".claude" / "settings.json").write_text(json.dumps(settings, indent=2))  # pasted as printed
    token_file = home / ".config" / "permission-bot" / "agent-token"
    assert f"reads its agent token from {token_file}" in note and "does not exist yet" in note

    pasted = json.loads((project / ".claude" / "settings.json").read_text())
    (hook,) = pasted["hooks"]["PermissionRequest"][0]["hooks"]
    assert "--token-file" in hook["command"] and hook["timeout"] > 60
    data = hook_input("claude-code-PermissionRequest-Bash", sid)
    data["cwd"] = str(project)

    # before the token is there: no decision, and Claude Code is shown why (its stderr is dropped)
    proc = await run_like_claude(station, hook["command"], project, home, data)
    code, out, err = await finish(proc)
    assert code == 0 and "hookSpecificOutput" not in out
    assert str(token_file) in out["systemMessage"] and "cannot read it" in out["systemMessage"], err
    _, pending = await station.ahttp("GET", f"/permissions?session={sid}")
    assert pending == []

    token_file.parent.mkdir(parents=True)
    token_file.write_text(AGENT_TOKEN[1] + "\n")  # the one thing the user fills in
    token_file.chmod(0o600)
    proc = await run_like_claude(station, hook["command"], project, home, data)
    prompt = await station.prompt_for(sid)
    assert prompt and str(project) in content(prompt)["body"]
    _, rec = await station.ahttp("GET", f"/permissions/{sid}:1")
    assert rec["cwd"] == str(project) and rec["label"] == "claude-code"
    await station.alice.text("1", reply_to=prompt["event_id"])
    code, out, _ = await finish(proc)
    assert code == 0 and out["hookSpecificOutput"]["decision"] == {"behavior": "allow"}


async def test_printed_command_names_the_program_and_the_token_file_it_reads(
    station: Station, sid: str, tmp_path: Path
) -> None:
    """A virtualenv not on Claude Code's PATH: the printed command starts this very program by its absolute
    path; and the bare hook (no --token-file, no variable) reads the token file print-config names."""
    home, project = tmp_path / "home", tmp_path / "proj"
    project.mkdir(parents=True)
    settings, _ = printed_settings(station, home)
    (hook,) = settings["hooks"]["PermissionRequest"][0]["hooks"]
    words = shlex.split(hook["command"])
    assert os.path.isabs(words[0]) and Path(words[0]).resolve() == Path(station.exe).resolve(), words
    token_file = home / ".config" / "permission-bot" / "agent-token"
    token_file.parent.mkdir(parents=True)
    token_file.write_text(AGENT_TOKEN[1] + "\n")
    token_file.chmod(0o600)
    data = hook_input("claude-code-PermissionRequest-Bash", sid)
    data["cwd"] = str(project)
    bare = shlex.join([words[0], "hook", "claude-code", "--url", station.api_url])  # the default token file
    for n, command in enumerate((hook["command"], bare), start=1):
        data["tool_input"] = {**data["tool_input"], "command": f"touch {project}/H{n}"}
        proc = await run_like_claude(station, command, project, home, data, path="/usr/bin:/bin")
        prompt = await station.prompt_for(sid, seq=n)
        assert prompt, f"no prompt for {command!r}"
        await station.alice.text("1", reply_to=prompt["event_id"])
        code, out, err = await finish(proc)
        assert code == 0 and out["hookSpecificOutput"]["decision"] == {"behavior": "allow"}, (out, err)


@pytest.mark.parametrize("how", ["s", "session", "\U0001f501"])
async def test_session_shortcuts_pick_the_hooks_session_option(station: Station, sid: str, how: str) -> None:
    if how == "session":
        await station.drain()  # a plain answer binds only to the one open prompt: leave no other test's open
    proc = await start_hook(station, hook_input("claude-code-PermissionRequest-Bash", sid))
    prompt = await station.prompt_for(sid)
    assert prompt and "2. Allow for this session" in content(prompt)["body"]
    if how == "\U0001f501":
        await station.alice.react(prompt["event_id"], how)
    elif how == "s":
        await station.alice.text(how, reply_to=prompt["event_id"])
    else:
        await station.alice.text(how)  # plain: bound to the one open prompt just above it
    code, out, _ = await finish(proc)
    assert code == 0
    decision = out["hookSpecificOutput"]["decision"]
    assert decision["behavior"] == "allow"
    assert decision["updatedPermissions"][0]["rules"] == [{"toolName": "Bash", "ruleContent": "touch /work/proj/M1"}]
    _, rec = await station.ahttp("GET", f"/permissions/{sid}:1")
    assert rec["outcome"]["option_id"] == "allow_session" and rec["outcome"]["answered_by"] == station.alice.user_id
    assert rec["cwd"] == "/work/proj"


async def test_session_reaction_on_a_codex_prompt_says_there_is_none(station: Station, sid: str) -> None:
    proc = await start_hook(station, hook_input("codex-PermissionRequest-Bash", sid), cli="codex")
    prompt = await station.prompt_for(sid)
    assert prompt
    mark = station.alice.mark()
    await station.alice.react(prompt["event_id"], "\U0001f501")
    notice = await station.notice_after(mark, contains="no allow-for-this-session")
    assert notice and "for this session" not in content(notice)["body"].split("option. ", 1)[1]
    await station.alice.text("2", reply_to=prompt["event_id"])
    code, out, _ = await finish(proc)
    assert code == 0 and out["hookSpecificOutput"]["decision"]["behavior"] == "deny"
