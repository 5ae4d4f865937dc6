"""The proxy against a small in-process stand-in for the daemon's HTTP API (docs/design.md), with
the real SDK client and agent as processes: submissions, long-polls, cancels, restarts, fallbacks."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from aiohttp import web

from tests.agents.session import FOUR, ClientRun, script

TOKEN = "fake-token"
OURS = ("key", "label", "toolCallContext", "cwd")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FakeDaemon:
    """The permission routes the proxy uses, in memory; ``stop``/``start`` keep or drop the state."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.records: dict[str, dict[str, Any]] = {}
        self.keys: dict[tuple[str, str], str] = {}
        self.seq: dict[str, int] = {}
        self.submissions: list[dict[str, Any]] = []
        self.decisions: list[tuple[str, dict[str, Any]]] = []
        self.changed = asyncio.Condition()
        self.fail_submits = 0
        self.answer_first: list[str] = []  # options "answered" just before each next cancel
        self._runner: web.AppRunner | None = None

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/permissions", self.submit)
        app.router.add_get("/permissions/{id}", self.get)
        app.router.add_post("/permissions/{id}", self.decide)
        return app

    async def start(self, forget: bool = False) -> None:
        if forget:
            self.records.clear()
            self.keys.clear()
        self._runner = web.AppRunner(self.app(), shutdown_timeout=0.1)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _auth(self, request: web.Request) -> bool:
        return request.headers.get("Authorization") == f"Bearer {TOKEN}"

    async def submit(self, request: web.Request) -> web.Response:
        if not self._auth(request):
            return web.json_response({"error": "unauthorized", "reason": "token"}, status=401)
        if self.fail_submits > 0:
            self.fail_submits -= 1
            return web.json_response({"error": "busy"}, status=503)
        body = await request.json()
        self.submissions.append(body)
        sid = body["sessionId"]
        key = body.get("key")
        if key and (sid, key) in self.keys:
            return web.json_response(self.records[self.keys[(sid, key)]], status=200)
        n = self.seq[sid] = self.seq.get(sid, 0) + 1
        rid = f"{sid}:{n}"
        self.records[rid] = {
            "id": rid,
            "session_id": sid,
            "request_seq": n,
            "state": "pending",
            "outcome": None,
            "params": {k: v for k, v in body.items() if k not in OURS},
            "digest": digest({k: v for k, v in body.items() if k not in OURS}),
        }
        if key:
            self.keys[(sid, key)] = rid
        async with self.changed:
            self.changed.notify_all()
        return web.json_response(self.records[rid], status=201)

    async def get(self, request: web.Request) -> web.Response:
        rid = request.match_info["id"]
        wait = float(request.query.get("wait", "0"))
        if rid not in self.records:
            return web.json_response({"error": "not_found", "reason": rid}, status=404)
        async with self.changed:
            try:
                await asyncio.wait_for(
                    self.changed.wait_for(lambda: self.records.get(rid, {}).get("state") != "pending"), wait
                )
            except TimeoutError:
                pass
        if rid not in self.records:
            return web.json_response({"error": "not_found", "reason": rid}, status=404)
        return web.json_response(self.records[rid])

    async def decide(self, request: web.Request) -> web.Response:
        if not self._auth(request):
            return web.json_response({"error": "unauthorized", "reason": "token"}, status=401)
        rid = request.match_info["id"]
        body = await request.json()
        key_of = {r: k for (_, k), r in self.keys.items()}
        if body.get("decision") == "cancel" and (rid not in key_of or body.pop("key", None) != key_of[rid]):
            return web.json_response({"error": "not_found", "reason": rid}, status=404)  # the daemon: no key, no cancel
        self.decisions.append((rid, body))
        rec = self.records.get(rid)
        if rec is not None and body.get("decision") == "cancel" and self.answer_first:
            option_id = self.answer_first.pop(0)  # a person's answer lands just before the cancel
            await self.settle(rid, option_id, by="@alice:hs")
        if rec is None or rec["state"] != "pending":
            return web.json_response({"error": "not_found", "reason": rid}, status=404)
        if body.get("decision") == "cancel":
            await self.settle(rid, None, state="cancelled", by=body.get("by"))
        else:
            await self.settle(rid, body.get("option_id"), feedback=body.get("feedback"))
        return web.json_response(rec)

    async def settle(
        self,
        rid: str,
        option_id: str | None,
        *,
        state: str = "resolved",
        feedback: str | None = None,
        by: str | None = "api",
    ) -> None:
        rec = self.records[rid]
        rec["state"] = state
        rec["outcome"] = {
            "option_id": option_id,
            "feedback": feedback,
            "answered_by": by,
            "via": "cancel" if option_id is None else "api",
        }
        async with self.changed:
            self.changed.notify_all()

    async def wait_pending(self, n: int = 1, timeout: float = 30) -> list[dict[str, Any]]:
        def pending() -> list[dict[str, Any]]:
            return [r for r in self.records.values() if r["state"] == "pending"]

        await self.wait_for(lambda: len(pending()) >= n, timeout)
        return pending()

    async def wait_for(self, pred: Any, timeout: float = 30) -> None:
        async def loop() -> None:
            while not pred():
                await asyncio.sleep(0.02)

        await asyncio.wait_for(loop(), timeout)


@pytest.fixture
async def daemon() -> AsyncIterator[FakeDaemon]:
    d = FakeDaemon()
    await d.start()
    yield d
    await d.stop()


def flags(d: FakeDaemon, *more: str, token: str = TOKEN) -> list[str]:
    return ["--url", d.url, "--token", token, *more]


def digest(params: dict[str, Any]) -> str:
    return hashlib.sha256(rfc8785.dumps(params)).hexdigest()


async def test_sparse_request_goes_to_daemon_as_sent_plus_context(daemon: FakeDaemon, tmp_path: Path) -> None:
    c = await ClientRun.start(script(sparse=True), flags(daemon, "--label", "my-agent"), tmp_path)
    try:
        sid = await c.session_id()
        (rec,) = await daemon.wait_pending()
        body = daemon.submissions[0]
        assert body["sessionId"] == sid and body["label"] == "my-agent"
        assert body["key"] and body["toolCall"] == {"toolCallId": "call_1"}
        assert body["toolCallContext"] == {
            "title": "Run the test suite",
            "kind": "execute",
            "rawInput": {"command": "bun test"},
            "locations": [{"path": "apps/hub"}],
        }
        await daemon.settle(rec["id"], "allow_always", feedback="fine, but be quick")
        out = await c.outcome()
        assert out["outcome"] == "selected" and out["optionId"] == "allow_always"
        assert out["_meta"] == {"feedback": "fine, but be quick"}
        # the params reached the daemon exactly as the agent sent them
        assert digest({k: v for k, v in body.items() if k not in OURS}) == out["sent_digest"]
        done = await c.wait_line(lambda d: d.get("event") == "done")
        assert done["client_permission_requests"] == 0
        assert await c.finish() == 0
    finally:
        await c.close()


async def test_full_request_has_no_context_and_cancelled_record_cancels(daemon: FakeDaemon, tmp_path: Path) -> None:
    c = await ClientRun.start(script(), flags(daemon), tmp_path)
    try:
        (rec,) = await daemon.wait_pending()
        assert "toolCallContext" not in daemon.submissions[0] and "label" not in daemon.submissions[0]
        await daemon.settle(rec["id"], None, state="expired")
        out = await c.outcome()
        assert out["outcome"] == "cancelled"
    finally:
        await c.close()


async def test_session_cancel_cancels_every_pending_request(daemon: FakeDaemon, tmp_path: Path) -> None:
    scripts = [script(tool_call_id="call_1"), script(tool_call_id="call_2", title="Second")]
    c = await ClientRun.start(scripts, flags(daemon), tmp_path, client_flags=["--cancel-after", "2"])
    try:
        await daemon.wait_pending(2)
        outs = await c.outcomes(2)
        assert [o["outcome"] for o in outs] == ["cancelled", "cancelled"]
        assert sorted(r for r, b in daemon.decisions if b == {"decision": "cancel", "by": "client"}) == sorted(
            daemon.records
        )
        assert all(r["state"] == "cancelled" for r in daemon.records.values())
        done = await c.wait_line(lambda d: d.get("event") == "done")
        assert done["stop_reasons"] == ["cancelled", "cancelled"]
    finally:
        await c.close()


async def test_agent_exit_cancels_pending_and_passes_its_code(daemon: FakeDaemon, tmp_path: Path) -> None:
    c = await ClientRun.start(script(exit_after=1.0, exit_code=5), flags(daemon), tmp_path)
    try:
        await daemon.wait_pending()
        assert await c.finish() == 5
        (rec,) = daemon.records.values()
        assert rec["state"] == "cancelled" and rec["outcome"]["answered_by"] == "agent"
    finally:
        await c.close()


async def test_client_leaving_cancels_pending(daemon: FakeDaemon, tmp_path: Path) -> None:
    c = await ClientRun.start(script(), flags(daemon), tmp_path, client_flags=["--exit-after", "1.5"])
    try:
        await daemon.wait_pending()
        assert await c.finish() == 0
        (rec,) = daemon.records.values()
        assert rec["state"] == "cancelled" and rec["outcome"]["answered_by"] == "client"
    finally:
        await c.close()


@pytest.mark.parametrize("forget", [False, True], ids=["restart", "restart-with-state-lost"])
async def test_daemon_restart_mid_pending_loses_nothing(daemon: FakeDaemon, tmp_path: Path, forget: bool) -> None:
    c = await ClientRun.start(script(), flags(daemon), tmp_path)
    try:
        (rec,) = await daemon.wait_pending()
        await daemon.stop()
        await asyncio.sleep(1.5)
        await daemon.start(forget=forget)
        if forget:  # the proxy's poll gets 404 and submits again, with the same key
            await daemon.wait_for(lambda: len(daemon.submissions) == 2)
            assert daemon.submissions[0] == daemon.submissions[1]
        (rec,) = await daemon.wait_pending()
        await daemon.settle(rec["id"], "reject_once")
        out = await c.outcome()
        assert out["optionId"] == "reject_once"
    finally:
        await c.close()


async def test_daemon_coming_up_late_and_5xx_are_retried(tmp_path: Path) -> None:
    d = FakeDaemon()
    d.fail_submits = 2
    c = await ClientRun.start(script(), flags(d, "--connect-timeout", "20s"), tmp_path)
    try:
        await c.session_id()
        await asyncio.sleep(1.0)
        await d.start()
        (rec,) = await d.wait_pending()
        await d.settle(rec["id"], "allow_once")
        assert (await c.outcome())["optionId"] == "allow_once"
        assert await c.logged("daemon_reachable_again") and "fallback_" not in c.stderr()
    finally:
        await c.close()
        await d.stop()


@pytest.mark.parametrize(
    ("options", "expect"),
    [
        (FOUR, {"outcome": "selected", "optionId": "reject_once"}),
        ([["ok", "Allow", "allow_once"], ["never", "Never", "reject_always"]], {"outcome": "cancelled"}),
    ],
    ids=["reject_once", "no-reject_once"],
)
async def test_fallback_reject_when_unreachable(tmp_path: Path, options: Any, expect: dict[str, Any]) -> None:
    flags_ = ["--url", f"http://127.0.0.1:{free_port()}", "--connect-timeout", "1s"]
    c = await ClientRun.start(script(options=options), flags_, tmp_path)
    try:
        out = await c.outcome()
        assert {k: out[k] for k in expect} == expect
        done = await c.wait_line(lambda d: d.get("event") == "done")
        assert done["client_permission_requests"] == 0
        assert await c.finish() == 0
        assert "fallback_rejected" in c.stderr()
    finally:
        await c.close()


async def test_fallback_forward_maps_the_client_answer_back(tmp_path: Path) -> None:
    flags_ = ["--url", f"http://127.0.0.1:{free_port()}", "--connect-timeout", "1s", "--fallback", "forward"]
    scripts = [script(tool_call_id="c1"), script(tool_call_id="c2")]
    c = await ClientRun.start(scripts, flags_, tmp_path, client_flags=["--answer", "allow_always"])
    try:
        outs = await c.outcomes(2)
        assert [o["optionId"] for o in outs] == ["allow_always", "allow_always"]
        done = await c.wait_line(lambda d: d.get("event") == "done")
        assert done["client_permission_requests"] == 2
        assert await c.logged("fallback_forwarded")
    finally:
        await c.close()


async def test_refused_token_falls_back_at_once(daemon: FakeDaemon, tmp_path: Path) -> None:
    c = await ClientRun.start(script(), flags(daemon, "--connect-timeout", "60s", token="wrong"), tmp_path)
    try:
        out = await c.outcome(timeout=15)
        assert out["optionId"] == "reject_once" and out["elapsed_ms"] < 10_000
        assert await c.logged("HTTP 401")
    finally:
        await c.close()


async def test_discovery_from_environment(daemon: FakeDaemon, tmp_path: Path) -> None:
    env = {"PERMISSION_BOT_URL": daemon.url, "PERMISSION_BOT_TOKEN": TOKEN}
    c = await ClientRun.start(script(), [], tmp_path, env=env)
    try:
        (rec,) = await daemon.wait_pending()
        await daemon.settle(rec["id"], "allow_once")
        assert (await c.outcome())["optionId"] == "allow_once"
    finally:
        await c.close()


async def test_stdout_carries_only_json_rpc(daemon: FakeDaemon, tmp_path: Path) -> None:
    """A raw client: every byte the proxy writes on stdout is the agent's JSON-RPC."""
    from tests.agents.session import PY, SCRIPTED_AGENT, proxy_cmd

    proc = await asyncio.create_subprocess_exec(
        *proxy_cmd(),
        *flags(daemon),
        "--",
        PY,
        SCRIPTED_AGENT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdin and proc.stdout and proc.stderr
    lines: list[dict[str, Any]] = []

    async def call(i: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert proc.stdin and proc.stdout
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}).encode() + b"\n")
        while True:
            raw = await asyncio.wait_for(proc.stdout.readline(), 30)
            msg = json.loads(raw)
            lines.append(msg)
            if msg.get("id") == i and "method" not in msg:
                return msg

    await call(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    sid = (await call(2, "session/new", {"cwd": "/tmp", "mcpServers": []}))["result"]["sessionId"]
    turn = asyncio.create_task(
        call(3, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": json.dumps(script())}]})
    )
    (rec,) = await daemon.wait_pending()
    await daemon.settle(rec["id"], "allow_once")
    res = await turn
    assert res["result"]["stopReason"] == "end_turn"
    proc.stdin.close()
    rest = await proc.stdout.read()
    assert await proc.wait() == 0
    lines += [json.loads(x) for x in rest.splitlines()]
    assert all(m.get("jsonrpc") == "2.0" for m in lines)
    assert not any(m.get("method") == "session/request_permission" for m in lines)
    err = (await proc.stderr.read()).decode()
    assert "permission_request_settled" in err
    for line in err.splitlines():
        assert line.startswith("timestamp=") and " level=" in line, line
