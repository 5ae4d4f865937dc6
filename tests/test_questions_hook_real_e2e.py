"""Real Claude Code through the product's hook, offline, against the real Synapse (issue 33).

Claude Code **2.1.332** (``@anthropic-ai/claude-code``, its native binary, the CLI FACTS.md records), pinned in
``tests/agents-npm``, run as an SDK host runs it (``-p --input-format stream-json --permission-prompt-tool
stdio``; the tools ask only with a host, FACTS.md facts 1-3) with the product's PermissionRequest hook from
``--settings``, a fresh ``HOME`` and the scripted model API (``tests.support.model_api``) on loopback. This test
is the host and never answers ``can_use_tool``: every decision is the hook's, from the room.

- ``AskUserQuestion`` with two questions (one multi-select), answered by number, by label and by the person's
  own words (a reply to the prompt); the model's tool_result is exactly facts 12-14's text.
- ``ExitPlanMode`` by the plan-file flow (fact 10: EnterPlanMode, the plan written to the plan file, then
  ``ExitPlanMode{}``): approved (fact 27: the mode goes back to ``default``, the next Write is asked),
  approved with accept-edits (fact 30: ``acceptEdits``, the next Write is not asked), and sent back with
  feedback (fact 31: the model reads it verbatim, the session stays in plan mode).

Claude Code 2.1.44 (the Agent SDK's ``cli.js``, where a plain ``allow`` was final) answers one question form too:
the same hook output works with it. Claude Code's native binary comes from its platform package
(``@anthropic-ai/claude-code-linux-x64`` here); where npm installed none for this machine, the 2.1.332 cases skip.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests import test_real_agents_e2e as real
from tests.support.model_api import ModelApi
from tests.support.station import AGENT_TOKEN

pytestmark = real.pytestmark
ANTHROPIC = real.BIN.parent / "@anthropic-ai"
NATIVE = sorted(ANTHROPIC.glob("claude-code-*/claude"))  # the one platform package npm installed here
CLI_JS = ANTHROPIC / "claude-agent-sdk" / "cli.js"  # Claude Code 2.1.44
QUESTIONS = json.loads((Path(__file__).parent / "fixtures" / "questions" /
                        "hook-PermissionRequest-AskUserQuestion.json").read_text())["tool_input"]
DB, EXTRAS = (q["question"] for q in QUESTIONS["questions"])
PLAN = "# Plan\n\n1. Create the file M1\n2. Run the tests\n"  # what model_api's plan flow writes


def claude(version: str) -> list[str]:
    """The command that runs Claude Code ``version``; skips (2.1.332 with no platform package) or fails (none
    installed at all, which CI never allows)."""
    if not real.BIN.is_dir():
        pytest.fail(f"{real.BIN.parent} is missing: run `npm ci --ignore-scripts` in tests/agents-npm")
    if version == "2.1.44":
        return ["node", str(CLI_JS)]
    if not NATIVE:
        pytest.skip(f"Claude Code 2.1.332 has no native binary for this platform in {ANTHROPIC} "
                    "(npm installs @anthropic-ai/claude-code-<os>-<arch> only where one is published)")
    return [str(NATIVE[0])]


class Host:
    """Claude Code run as an SDK host runs it, with the product's PermissionRequest hook (``hook claude-code``,
    ``--url`` and an agent token file) and one user turn on stdin; its stream read as it comes."""

    def __init__(self, proc: asyncio.subprocess.Process, work: Path) -> None:
        self.proc, self.work, self.lines = proc, work, list[dict[str, Any]]()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, station: Any, api: ModelApi, tmp: Path, cli: list[str], prompt: str) -> Host:
        work, home = tmp / "work", tmp / "home"
        work.mkdir()
        home.mkdir()
        token_file = tmp / "agent.token"
        token_file.write_text(AGENT_TOKEN[1] + "\n")
        token_file.chmod(0o600)
        hook = f"{station.exe} hook claude-code --url {station.api_url} --token-file {token_file}"
        settings = {"hooks": {"PermissionRequest": [{"matcher": "*", "hooks": [
            {"type": "command", "command": hook, "timeout": 120}]}]}}
        (tmp / "settings.json").write_text(json.dumps(settings))
        env = {**real.QUIET, **{k: os.environ[k] for k in ("PATH", "PYTHONPATH") if k in os.environ},
               "HOME": str(home), "ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "dummy",
               "HTTPS_PROXY": api.proxy_url, "HTTP_PROXY": api.proxy_url, "NO_PROXY": "127.0.0.1,localhost"}
        proc = await asyncio.create_subprocess_exec(
            *cli, "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
            "--permission-prompt-tool", "stdio", "--settings", str(tmp / "settings.json"),
            cwd=work, env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=(tmp / "stderr").open("wb"), limit=16 * 1024 * 1024,
        )
        assert proc.stdin is not None
        turn = {"type": "user", "message": {"role": "user", "content": prompt}}
        proc.stdin.write(json.dumps(turn).encode() + b"\n")
        await proc.stdin.drain()
        return cls(proc, work)

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            if line.strip().startswith(b"{"):
                self.lines.append(json.loads(line))

    async def _line(self, pred: Any, timeout: float) -> dict[str, Any]:
        for _ in range(int(timeout * 20)):
            if (found := next((m for m in self.lines if pred(m)), None)) is not None:
                return found
            if self._reader.done():
                break
            await asyncio.sleep(0.05)
        raise AssertionError(f"not in Claude Code's stream (rc {self.proc.returncode}); its last lines: "
                             f"{json.dumps(self.lines[-4:])[-3000:]}")

    async def session_id(self, timeout: float = 60) -> str:
        init = await self._line(lambda m: m.get("type") == "system" and m.get("subtype") == "init", timeout)
        return str(init["session_id"])

    async def result(self, timeout: float = 90) -> dict[str, Any]:
        """The turn's ``result`` line; then stdin is closed and the process ends."""
        done = await self._line(lambda m: m.get("type") == "result", timeout)
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        async with asyncio.timeout(30):
            await self.proc.wait()
        return done

    def modes(self) -> list[str]:
        """The permission modes the stream reported, in order (``system/status``)."""
        return [m["permissionMode"] for m in self.lines
                if m.get("type") == "system" and m.get("subtype") == "status" and "permissionMode" in m]

    def host_asked(self) -> list[str]:
        """The tools Claude Code asked this host about (``can_use_tool``; it never gets an answer here)."""
        return [m["request"]["tool_name"] for m in self.lines
                if m.get("type") == "control_request" and m["request"].get("subtype") == "can_use_tool"]

    def withdrawn(self) -> int:
        """How many of those Claude Code withdrew (``control_cancel_request``: a hook decided)."""
        return sum(m.get("type") == "control_cancel_request" for m in self.lines)

    def tool_results(self, name: str) -> list[dict[str, Any]]:
        """The tool_result blocks Claude Code reported for tool ``name``'s calls."""
        ids = {b["id"] for m in self.lines if m.get("type") == "assistant"
               for b in m["message"]["content"] if b.get("type") == "tool_use" and b.get("name") == name}
        return [b for m in self.lines if m.get("type") == "user" and isinstance(m["message"].get("content"), list)
                for b in m["message"]["content"] if b.get("type") == "tool_result" and b.get("tool_use_id") in ids]

    async def close(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        await self._reader


async def _run(station: Any, tmp: Path, cli: list[str], prompt: str) -> tuple[ModelApi, Host, str]:
    api = await ModelApi().start()
    host = await Host.start(station, api, tmp, cli, prompt)
    try:
        return api, host, await host.session_id()
    except BaseException:
        await host.close()
        await api.close()
        raise


ANSWERED = (f'Your questions have been answered: "{DB}"="Postgres", "{EXTRAS}"="Docker, CI". '
            "You can now continue with these answers in mind.")  # fact 12
OWN_WORDS = (f'The user answered: "{DB}"="MySQL, please", "{EXTRAS}"="Docker, CI". Read the answers carefully '
             "— they may request clarification, changes, or that you not proceed — and follow what they actually "
             "say.")  # fact 14
OWN_WORDS_2144 = (f'User has answered your questions: "{DB}"="MySQL, please", "{EXTRAS}"="Docker, CI". '
                  "You can now continue with the user's answers in mind.")  # 2.1.44's words for any answer


@pytest.mark.parametrize(("version", "first", "second", "expect"), [
    ("2.1.332", "1", "Docker, CI", ANSWERED),  # a number; labels (multi-select)
    ("2.1.332", "MySQL, please", "2, 1", OWN_WORDS),  # own words, a reply; numbers (multi-select)
    ("2.1.44", "MySQL, please", "ci, docker", OWN_WORDS_2144),
], ids=["332-number-labels", "332-own-words-numbers", "244-own-words-labels"])
async def test_real_claude_code_gets_the_rooms_answers(
    station: Any, tmp_path: Path, version: str, first: str, second: str, expect: str
) -> None:
    """A two-question AskUserQuestion (the second multi-select): the hook posts one prompt per question; alice
    replies to each; the model reads exactly the answers (FACTS.md facts 12-14)."""
    cli = claude(version)
    await station.alice.follow()
    api, host, session = await _run(station, tmp_path, cli, f"Please ask me.\nASK: {json.dumps(QUESTIONS)}\n")
    try:
        p1 = await station.prompt_for(session, timeout=60, seq=1)
        p2 = await station.prompt_for(session, timeout=30, seq=2)
        assert p1 and p2, f"no question prompts; model calls {api.requests}"
        assert p1["content"]["tool_kind"] == "question" and p1["content"]["title"] == DB
        assert [o["id"] for o in p2["content"]["options"]] == ["Docker", "CI", "Docs", "decline"]
        await station.alice.text(first, reply_to=p1["event_id"])
        await station.alice.text(second, reply_to=p2["event_id"])
        done = await host.result()
        assert done["subtype"] == "success", done
        assert api.tool_results == [expect]
        assert [r.get("is_error") is True for r in host.tool_results("AskUserQuestion")] == [False]
        assert host.host_asked() == ["AskUserQuestion"] and host.withdrawn() == 1  # the hook decided
    finally:
        await host.close()
        await api.close()


@pytest.mark.parametrize(("answer", "option"), [
    ("1", "approve"), ("2", "approve_accept_edits"), ("3 - add a step that runs the linter", "keep_planning"),
], ids=["approve", "approve-accept-edits", "keep-planning"])
async def test_real_claude_code_plan_through_the_hook(station: Any, tmp_path: Path, answer: str, option: str) -> None:
    """Plan mode's flow (fact 10); the hook posts the plan from the plan file; alice approves it (fact 27), approves
    it with accept-edits (fact 30) or keeps planning with feedback (fact 31). After an approval the model writes
    a file: asked again in ``default`` (alice rejects it), not asked in ``acceptEdits``."""
    cli = claude("2.1.332")
    await station.alice.follow()
    out = tmp_path / "work" / "M1"
    prompt = f"Please plan it.\nPLAN: Create the file M1\nWRITE: {out}\n"
    api, host, session = await _run(station, tmp_path, cli, prompt)
    try:
        p = await station.prompt_for(session, timeout=60, seq=1)
        assert p, f"no plan prompt; model calls {api.requests}"
        assert p["content"]["tool_kind"] == "switch_mode" and "│ 1. Create the file M1\n│ 2. Run the tests" in p[
            "content"]["body"]  # the plan Claude Code read from the plan file (fact 10)
        await station.alice.text(answer, reply_to=p["event_id"])
        rec = await station.record(p["content"]["request_id"])
        assert rec["kind"] == "plan" and rec["outcome"]["option_id"] == option, rec
        if answer == "1":  # default mode: the Write is a permission again; alice rejects it
            w = await station.prompt_for(session, timeout=60, seq=2)
            assert w and "Write" in w["content"]["body"], w
            await station.alice.react(w["event_id"], "❌")
        done = await host.result()
        assert done["subtype"] == "success", done
        (plan,) = host.tool_results("ExitPlanMode")
        plan_file = next(iter(host.work.parent.glob("home/.claude/plans/*.md")))
        if answer == "3 - add a step that runs the linter":
            assert plan["is_error"] is True and api.tool_results[-1] == "add a step that runs the linter"
            assert host.modes()[-1:] == ["plan"] and not out.exists()
            assert host.host_asked() == ["ExitPlanMode"] and host.withdrawn() == 1
            return
        assert api.tool_results[-2] == (
            "User has approved your plan. You can now start coding. Start with updating your todo list if "
            f"applicable\n\nYour plan has been saved to: {plan_file}\nYou can refer back to it if needed during "
            f"implementation.\n\n## Approved Plan:\n{PLAN}")
        if answer == "1":
            assert host.modes()[-2:] == ["plan", "default"] and not out.exists()
            assert host.host_asked() == ["ExitPlanMode", "Write"] and host.withdrawn() == 2
            assert (await station.record(w["content"]["request_id"]))["outcome"]["option_id"] == "deny"
        else:
            assert host.modes()[-2:] == ["plan", "acceptEdits"] and out.read_text() == "M1\n"
            assert host.host_asked() == ["ExitPlanMode"] and host.withdrawn() == 1  # the Write was not asked
    finally:
        await host.close()
        await api.close()
