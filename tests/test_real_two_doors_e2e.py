"""Both doors for one real Claude Code, offline, against the real Synapse: Zed's ACP adapter behind
``permission-bot acp`` AND a project ``PermissionRequest`` hook running ``permission-bot hook claude-code``.

Under an SDK host Claude Code asks the host (``canUseTool``, which the adapter turns into
``session/request_permission``) and runs the PermissionRequest hook at the same time. The bot
pairs the two by session id and tool input (``bot/api/hook_hold.py``), which holds only if the
adapter's ACP ``sessionId`` is the ``session_id`` Claude Code gives its hooks: the adapter passes
its own ``randomUUID()`` to the SDK as ``options.sessionId``. Checked here on a real run: the hook
fires (its input is teed to a file), carries the ACP session id, and the room gets one prompt
that alice answers. Which door reaches the daemon first is a race; measured, the ACP door (the
hook spends a shell and a Python start first), and the hook stands down.
"""

from __future__ import annotations

import asyncio
import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests import test_real_agents_e2e as real
from tests.support.faultproxy import FaultProxy
from tests.support.human import content, rel
from tests.support.model_api import ModelApi
from tests.support.station import AGENT_TOKEN
from tests.test_acp_e2e import http

pytestmark = real.pytestmark
model_api = real.model_api
FIELD = re.compile(r"(\w+)='([^']*)'")
ACP_DELAY = 10.0  # seconds the ACP door's request is held to let the hook be first


def hook_settings(station: Any, tmp: Path, event: str = "PermissionRequest") -> dict[str, Any]:
    """The project settings: ``print-config``'s PermissionRequest hook, with ``--url`` and an agent
    token file; the command tees its input to ``hook-inputs.jsonl`` and appends its exit code to
    ``hook-exits``, so the test sees that (and with what) it ran."""
    token_file = tmp / "agent.token"
    token_file.write_text(AGENT_TOKEN[1] + "\n")
    token_file.chmod(0o600)
    out = tmp / "hook-stdout"
    hook = f"{station.exe} hook claude-code --url {station.api_url} --token-file {token_file}"
    command = (
        f"tee -a {tmp / 'hook-inputs.jsonl'} | {hook} > {out}; rc=$?; cat {out}; echo $rc >> {tmp / 'hook-exits'}; "
        "exit $rc"
    )
    printed = station.cli("hook", "print-config", "claude-code", "--prompt-timeout", "60s")
    assert printed.returncode == 0, printed.stderr
    settings: dict[str, Any] = json.loads(printed.stdout)
    (entry,) = settings["hooks"].pop("PermissionRequest")
    entry["hooks"][0]["command"] = command
    return {"hooks": {event: [entry]}}


async def records_of(station: Any, sid: str) -> list[dict[str, Any]]:
    """Every record of a session, settled or not: ids are ``SESSION:SEQ`` from 1."""
    out: list[dict[str, Any]] = []
    while True:
        st, rec = await http(station, "GET", f"/permissions/{sid}:{len(out) + 1}")
        if st == 404:
            return out
        assert st == 200, rec
        out.append(rec)


def daemon_events(station: Any, sid: str) -> list[dict[str, str]]:
    """The daemon's log lines naming this session (structlog key='value' lines)."""
    lines = station.log_path.read_text(errors="replace").splitlines()
    return [dict(FIELD.findall(line)) for line in lines if sid in line]


def seconds(a: dict[str, str], b: dict[str, str]) -> float:
    return (datetime.fromisoformat(b["timestamp"]) - datetime.fromisoformat(a["timestamp"])).total_seconds()


@pytest.mark.parametrize("order", ["as_it_comes", "acp_late"])
async def test_hook_and_acp_door_for_one_tool_call_give_one_live_prompt(
    station: Any, model_api: ModelApi, tmp_path: Path, order: str
) -> None:
    """``as_it_comes``: a race; measured, the ACP door is first and the hook defers: one prompt.
    ``acp_late``: the ACP door's request is held ACP_DELAY, so the hook posts first; its prompt is
    withdrawn ("came through ACP") once the ACP request comes, which alice answers. Only the request is
    held, not the proxy's claim on the session it sends at ``session/new`` (issue 32: only the claiming
    proxy run's request may replace the hook's), which in real life is there long before any tool call.
    Either way one prompt is live and the answer to it decides."""
    late = FaultProxy("127.0.0.1", station.api_port) if order == "acp_late" else None
    if late:
        late.hold("POST /permissions HTTP", ACP_DELAY)
        late.start()
    settings = hook_settings(station, tmp_path)
    run = await real.Run.start(station, model_api, tmp_path, "claude", settings=settings, url=late and late.url)
    inputs, exits = tmp_path / "hook-inputs.jsonl", tmp_path / "hook-exits"
    try:
        sid = await run.client.session_id(90)
        # the hook fired, and Claude Code gave it the adapter's ACP session id: the pairing's premise
        hook_input = await _hook_done(inputs, exits)
        recs = await records_of(station, sid)  # the hook stands down only once the ACP request is in
        (acp_rec,) = [r for r in recs if r["label"] == "real-claude"]
        p = await station.prompt_for(sid, seq=acp_rec["request_seq"])
        assert p, "no prompt for the ACP door's request"
        assert acp_rec["state"] == "pending" and not run.marker.exists()
        assert hook_input["hook_event_name"] == "PermissionRequest" and hook_input["tool_name"] == "Bash"
        assert hook_input["session_id"] == sid == acp_rec["session_id"]
        assert hook_input["tool_input"] == acp_rec["raw_input"]
        assert exits.read_text().split() == ["0"]
        assert (tmp_path / "hook-stdout").read_text() == ""  # no decision: the ACP door answers
        first = _first_door(station, sid, recs)
        assert first == "hook" or not late  # as it comes, a race: so far always "acp"
        await station.alice.text(real.number_of(p["content"], acp_rec, "allow_once"), reply_to=p["event_id"])
        done = await run.done(model_api)
        assert done["stop_reasons"] == ["end_turn"] and done["client_permission_requests"] == 0
        assert run.marker.exists(), "allowed once, yet the tool did not run"
        recs = await records_of(station, sid)
        _, pending = await http(station, "GET", f"/permissions?session={sid}")
        assert pending == [] and all(r["state"] != "pending" for r in recs), recs
        acp_rec = await real.record(station, acp_rec["id"])
        assert acp_rec["state"] == "resolved" and acp_rec["outcome"]["answered_by"] == station.alice.user_id
        prompts = _prompts(station, sid)
        if first == "hook":  # its prompt was posted first and withdrawn for the ACP one
            hook_rec, acp_again = recs
            assert hook_rec["label"] == "claude-code" and acp_again["id"] == acp_rec["id"]
            assert hook_rec["state"] == "cancelled"
            assert hook_rec["outcome"]["answered_by"] == "claude-code hook"
            assert "came through ACP" in hook_rec["outcome"]["feedback"]
            assert [e["event_id"] for e in prompts] == [hook_rec["prompt_event_id"], p["event_id"]]
            edit = await station.edit_of(hook_rec["prompt_event_id"])
            assert edit and "came through ACP" in content(edit)["m.new_content"]["body"]
        else:  # the hook deferred: nothing else was ever posted
            assert [r["id"] for r in recs] == [acp_rec["id"]]
            assert [e["event_id"] for e in prompts] == [p["event_id"]]
        # nothing more comes: a short bounded look at the room after everything settled
        assert await station.alice.wait(lambda e: _is_prompt(station, sid, e) and e not in prompts, 2) is None
    finally:
        await run.client.close()
        if late:
            late.stop()


async def _hook_done(inputs: Path, exits: Path, timeout: float = 90) -> dict[str, Any]:
    """The hook's one input, once its command has exited."""
    for _ in range(int(timeout * 10)):
        if exits.exists() and exits.read_text().strip():
            break
        await asyncio.sleep(0.1)
    assert exits.exists(), "the PermissionRequest hook never ran under the ACP adapter"
    (line,) = inputs.read_text().splitlines()
    data: dict[str, Any] = json.loads(line)
    return data


def _first_door(station: Any, sid: str, recs: list[dict[str, Any]]) -> str:
    """Which door reached the daemon first ("acp" or "hook"); printed with the gap (seconds)."""
    events = daemon_events(station, sid)
    submitted = [e for e in events if e.get("event") == "request_submitted"]
    deferred = [e for e in events if e.get("event") == "hook_defers_to_other_door"]
    first = "hook" if recs[0]["label"] == "claude-code" else "acp"
    if first == "acp":
        assert len(deferred) == 1 and deferred[0]["request_id"] == recs[0]["id"], events
        gap = seconds(submitted[0], deferred[0])
    else:
        withdrawn = [e for e in events if e.get("event") == "hook_request_withdrawn"]
        assert len(withdrawn) == 1 and withdrawn[0]["request_id"] == recs[0]["id"], events
        gap = seconds(submitted[0], submitted[1])
    print(f"two_doors first={first} second_after={gap:.3f}s records={len(recs)}")
    return first


def _is_prompt(station: Any, sid: str, e: dict[str, Any]) -> bool:
    return bool(station.is_prompt(e) and content(e).get("session_id") == sid and rel(e).get("rel_type") is None)


def _prompts(station: Any, sid: str) -> list[dict[str, Any]]:
    return [e for e in station.alice.events if _is_prompt(station, sid, e)]


async def test_pre_tool_use_hook_under_the_adapter_asks_alone(
    station: Any, model_api: ModelApi, tmp_path: Path
) -> None:
    """A PreToolUse hook runs before Claude Code's permission check, not beside it: its allow
    runs the tool without asking the host, so the ACP door never sees a request."""
    settings = hook_settings(station, tmp_path, "PreToolUse")
    run = await real.Run.start(station, model_api, tmp_path, "claude", settings=settings)
    try:
        sid = await run.client.session_id(90)
        p = await station.prompt_for(sid, timeout=90)
        assert p, f"no prompt from the PreToolUse hook; stderr:\n{run.client.stderr()}"
        (rec,) = await records_of(station, sid)
        assert rec["label"] == "claude-code" and rec["session_id"] == sid and not run.marker.exists()
        assert rec["params"]["toolCall"]["_meta"]["claude-code"]["hookEventName"] == "PreToolUse"
        await station.alice.text("1", reply_to=p["event_id"])  # 1. Allow once
        hook_input = await _hook_done(tmp_path / "hook-inputs.jsonl", tmp_path / "hook-exits")
        assert hook_input["session_id"] == sid and hook_input["hook_event_name"] == "PreToolUse"
        out = json.loads((tmp_path / "hook-stdout").read_text())
        assert out["hookSpecificOutput"]["permissionDecision"] == "allow"
        done = await run.done(model_api)
        assert done["stop_reasons"] == ["end_turn"] and done["client_permission_requests"] == 0
        assert run.marker.exists(), "allowed by the hook, yet the tool did not run"
        assert [(r["id"], r["state"]) for r in await records_of(station, sid)] == [(rec["id"], "resolved")]
        assert "permission_request_received" not in run.client.stderr()  # the ACP door was never asked
        assert await station.alice.wait(lambda e: _is_prompt(station, sid, e) and e != p, 2) is None
    finally:
        await run.client.close()
