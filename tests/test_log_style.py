"""One log style across every command that logs (issue 34, item 11): `run`, `acp`, `hook`, `doctor`, `e2ee`,
`state` and `audit` each run as a subprocess with ``PERMISSION_BOT_LOG_FORMAT=json``; every stderr line they
write is one JSON object with ``timestamp``, ``level`` and ``event`` first (the line that ends a failed command
aside: it stays one plain line), a library's record (matrix-nio's) comes through the same chain, nothing is
logged on stdout (the commands' own output), no secret is written. The daemon's homeserver is the in-process
fake (tests/support/fakematrix.py): no Synapse."""

from __future__ import annotations

import ast
import asyncio
import io
import json
import logging
import os
import re
import signal
import sys
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from aiohttp import web

from bot.demo.homeserver import free_port
from bot.util import logs
from tests.support.fakematrix import FakeHomeserver
from tests.support.station import exe_path, request_body

BOT_PASSWORD = "bot-password-7d1e0c"
AGENT = "agent-token-55e0a9f3"
DECIDER = "decider-token-c3b18e27"
SECRETS = (BOT_PASSWORD, AGENT, DECIDER)


def structured(stderr: str, *, last_plain: bool = False) -> list[dict[str, Any]]:
    """Every line of ``stderr`` as the JSON object it must be (the last one may be a command's plain error)."""
    lines = stderr.splitlines()
    if last_plain and lines:
        assert not lines[-1].startswith("{") and lines[-1].startswith("permission-bot"), lines[-1]
        lines = lines[:-1]
    out = []
    for line in lines:
        ev = json.loads(line)
        assert list(ev)[:3] == ["timestamp", "level", "event"], line
        assert ev["level"] in ("debug", "info", "warning", "error", "critical"), line
        assert re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)*", ev["event"]), line  # snake_case names everywhere
        out.append(ev)
    for s in SECRETS:
        assert s not in stderr
    return out


async def run(*args: str, env: dict[str, str], stdin: bytes = b"", timeout: float = 60) -> tuple[int, str, str]:
    p = await asyncio.create_subprocess_exec(
        exe_path(), *args, env=env, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(p.communicate(stdin), timeout)
    assert p.returncode is not None
    return p.returncode, out.decode(), err.decode()


class Keys:
    """A stand-in homeserver for `e2ee reset-identity`: takes the new identity, shows the bot's device."""

    def __init__(self, user: str, device: str) -> None:
        self.user, self.device, self.port = user, device, free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    async def start(self) -> web.AppRunner:
        async def any_call(req: web.Request) -> web.Response:
            if req.path.endswith("/keys/query"):
                dev = {"user_id": self.user, "device_id": self.device, "algorithms": [], "keys": {}}
                return web.json_response({"device_keys": {self.user: {self.device: dev}}})
            return web.json_response({})

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", any_call)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.port).start()
        return runner


@pytest.fixture
async def hs() -> AsyncIterator[FakeHomeserver]:
    hs = FakeHomeserver()
    answered: list[int] = []

    async def first_filter_malformed(req: web.Request) -> web.Response:
        if not answered:  # matrix-nio logs "Error validating response" (a library record) and the bot goes on
            answered.append(1)
            return web.json_response({"filter": "no id"})
        return await FakeHomeserver._upload_filter(hs, req)

    hs._upload_filter = first_filter_malformed  # type: ignore[method-assign]
    await hs.start()
    yield hs
    await hs.close()


async def test_every_command_logs_one_json_line_per_event_on_stderr(hs: FakeHomeserver, tmp_path: Path) -> None:
    bot = hs.register("permbot", BOT_PASSWORD)
    alice = hs.register("alice")
    room = hs.create_room(alice, invite=[bot])
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    config = tmp_path / "config.toml"
    config.write_text(f"""
[matrix]
homeserver = "{hs.url}"
user_id = "{bot}"
password = "{BOT_PASSWORD}"
room = "{room}"
encryption = false
sync_timeout = 0.5
[answerers]
users = ["{alice}"]
[api]
listen = "127.0.0.1:{port}"
[[api.tokens]]
name = "agent"
role = "agent"
secret = "{AGENT}"
[[api.tokens]]
name = "alice-cli"
role = "decider"
secret = "{DECIDER}"
[state]
path = "{tmp_path / 'state'}"
""")
    token_file = tmp_path / "agent-token"
    token_file.write_text(AGENT + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERMISSION_BOT_")}
    env["PERMISSION_BOT_LOG_FORMAT"] = "json"

    daemon = await asyncio.create_subprocess_exec(  # at debug: nio's lines (its warnings are rare) come too
        exe_path(), "run", "--config", str(config), env={**env, "PERMISSION_BOT_LOG_LEVEL": "debug"},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    assert daemon.stderr is not None and daemon.stdout is not None
    seen: list[str] = []
    try:
        while not any('"ready"' in s for s in seen) or not any('"matrix_library"' in s for s in seen):
            line = await asyncio.wait_for(daemon.stderr.readline(), 30)
            assert line, f"the daemon stopped: {seen}"
            seen.append(line.decode())

        # the proxy, with a request the daemon holds and a decider approves
        agent = (
            "import json, sys\n"
            f"print(json.dumps({{'jsonrpc': '2.0', 'id': 1, 'method': 'session/request_permission', "
            f"'params': {request_body('log-style')!r}}}), flush=True)\n"
            "print(sys.stdin.readline().strip(), flush=True)\n"  # the answer, shown to the client
        )
        proxy = await asyncio.create_subprocess_exec(
            exe_path(), "acp", "--url", url, "--token-file", str(token_file), "--", sys.executable, "-c", agent,
            env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # its stdin stays open (the client) until the answer came back
        rid = await _pending(url)
        approved = await run("permissions", "approve", rid, "--url", url, env={**env, "PERMISSION_BOT_TOKEN": DECIDER})
        assert approved[0] == 0 and proxy.stdout is not None and proxy.stdin is not None
        assert '"outcome"' in (await asyncio.wait_for(proxy.stdout.readline(), 20)).decode()
        proxy.stdin.close()
        _, err_b = await asyncio.wait_for(proxy.communicate(), 20)
        assert proxy.returncode == 0
        proxy_log = structured(err_b.decode())
        events = [e["event"] for e in proxy_log]
        assert "agent_started" in events and "permission_request_received" in events, events
        assert proxy_log[0]["event"] == "agent_started", proxy_log[0]
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon_stdout, rest = await asyncio.wait_for(daemon.communicate(), 30)
    assert await daemon.wait() == 0 and daemon_stdout == b""
    daemon_out = "".join(seen) + rest.decode()
    logged = structured(daemon_out)
    nio = [e for e in logged if e["event"] == "matrix_library"]
    assert nio and all(e["logger"].startswith("nio") for e in nio), nio
    stray = [e for e in nio if "Error validating response" in e["message"]]  # before an error answer nio reads
    assert stray and {e["level"] for e in stray} == {"debug"}, stray  # a debug line, not a stray warning
    assert {"state_folder", "ready", "request_submitted", "stopped"} <= {e["event"] for e in logged}

    # the others at once (each is a process start): their output on stdout untouched, nothing but structured
    # lines on stderr, the error that ends a command one plain line
    hook_input = json.dumps({"session_id": "s1", "cwd": "/tmp", "hook_event_name": "PermissionRequest",
                             "tool_name": "Bash", "tool_input": {"command": "ls"}}).encode()
    session = json.loads((await _inbox_value(tmp_path / "state", "matrix.session")) or "{}")
    keys = Keys(bot, session["device_id"])  # e2ee reset-identity's homeserver
    e2ee_config = tmp_path / "e2ee.toml"
    e2ee_config.write_text(config.read_text().replace(hs.url, keys.url))
    runner = await keys.start()
    try:
        hook, e2ee, doctor, audit, state = await asyncio.gather(
            run("hook", "claude-code", "--url", "http://127.0.0.1:9", "--token-file", str(token_file),
                "--connect-timeout", "0.2s", env={**env, "PERMISSION_BOT_LOG_LEVEL": "loud"}, stdin=hook_input),
            run("e2ee", "reset-identity", "--config", str(e2ee_config), env=env, stdin=BOT_PASSWORD.encode() + b"\n"),
            run("doctor", "--config", str(config), env=env),
            run("audit", "export", "--config", str(config), env=env),
            run("state", "migrate", "--to", f"postgresql://u:{BOT_PASSWORD}@127.0.0.1:9/x", "--config", str(config),
                env=env),
        )
    finally:
        await runner.cleanup()
    # the hook: a setting it cannot use is one structured warning; the error that ends it, one plain line
    assert hook[0] == 0 and "systemMessage" in hook[1]
    assert [e["event"] for e in structured(hook[2], last_plain=True)] == ["log_setting_ignored"]
    # e2ee: its log lines on stderr (they were on stdout, in a third style), its result alone on stdout
    code, out, err = e2ee
    assert code == 0 and out.startswith("published a new identity") and len(out.splitlines()) == 1, (out, err)
    assert "device_cross_signed" in [e["event"] for e in structured(err)]
    assert doctor[1].startswith("ok   config:") and not any(ln.startswith("{") for ln in doctor[1].splitlines())
    structured(doctor[2])
    assert audit[0] == 0 and [json.loads(ln)["seq"] for ln in audit[1].splitlines()] == [1], audit  # the approval
    structured(audit[2])
    assert state[0] == 1 and state[1] == "" and structured(state[2], last_plain=True) == []


async def _pending(url: str, timeout: float = 20) -> str:
    """The id of the one pending request, once there is one."""
    from bot.util import jsonhttp

    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        try:
            _, body = await asyncio.to_thread(jsonhttp.call, "GET", f"{url}/permissions", token=DECIDER)
        except jsonhttp.Unreachable:
            body = []
        if isinstance(body, list) and body:
            return str(body[0]["id"])
        await asyncio.sleep(0.05)
    raise AssertionError("no pending request")


async def _inbox_value(state: Path, key: str) -> str | None:
    import sqlite3

    with sqlite3.connect(state / "inbox.sqlite3") as db:
        row = db.execute("SELECT v FROM kv WHERE k = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


@pytest.fixture
def logs_to(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., io.StringIO]]:
    """Set the process's log up into a buffer (bot.util.logs.configure); put everything back afterwards."""
    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    monkeypatch.delenv(logs.FORMAT_ENV, raising=False)
    monkeypatch.delenv(logs.LEVEL_ENV, raising=False)

    def configure(**kw: Any) -> io.StringIO:
        sink = io.StringIO()
        logs.configure(sink=sink, **kw)
        return sink

    yield configure
    structlog.configure(**saved)
    root.handlers[:], root.level = handlers, level
    logging.captureWarnings(False)


def test_the_environment_wins_and_a_bad_value_is_ignored() -> None:
    assert logs.settings(None, None, {}) == ("info", "console", [])
    assert logs.settings("debug", "console", {logs.FORMAT_ENV: "JSON"}) == ("debug", "json", [])
    got = logs.settings("warning", "json", {logs.FORMAT_ENV: "xml", logs.LEVEL_ENV: "loud"})
    assert got == ("warning", "json", [logs.LEVEL_ENV, logs.FORMAT_ENV])


def test_library_records_go_through_the_one_chain_masked_and_thinned(logs_to: Callable[..., io.StringIO]) -> None:
    secret = "s3cret-token-value-42"
    sink = logs_to(fmt="json", secrets=[secret])
    logging.getLogger("aiohttp.client").warning("sent %s to the server", secret)
    logging.getLogger("nio.client.async_client").warning("Timed out, sleeping for %ds", 0)  # dropped
    logging.getLogger("nio.client.async_client").warning("Got 429 response (ratelimited), sleeping for %dms", 4700)
    logging.getLogger("asyncpg").info("chatter below warning")  # libraries: warnings and errors only
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("asyncio").exception("Task exception was never retrieved")
    for _ in range(30):
        logging.getLogger("aiosqlite").error("the same complaint")
    warnings.warn("an old API", DeprecationWarning, stacklevel=1)
    lines = [json.loads(ln) for ln in sink.getvalue().splitlines()]
    assert all(list(ev)[:3] == ["timestamp", "level", "event"] for ev in lines)
    assert lines[0] == {**lines[0], "level": "warning", "event": "library_log", "logger": "aiohttp.client",
                        "message": "sent *** to the server"}
    assert lines[1]["event"] == "matrix_rate_limited" and lines[1]["retry_in"] == 4.7
    assert lines[2]["event"] == "library_log" and lines[2]["level"] == "error" and "ValueError: boom" in lines[2][
        "exception"]
    same = [ev for ev in lines if ev.get("logger") == "aiosqlite"]
    assert len(same) == 20  # a flood of one library line is thinned like the bot's own
    assert lines[-1]["logger"] == "py.warnings" and "an old API" in lines[-1]["message"]
    assert secret not in sink.getvalue() and "Timed out" not in sink.getvalue() and "chatter" not in sink.getvalue()


def test_the_console_style_is_the_daemons_key_value_line(logs_to: Callable[..., io.StringIO]) -> None:
    sink = logs_to(level="info", fmt="console")
    structlog.get_logger().info("api_listening", listen="127.0.0.1:8750")
    logging.getLogger("aiohttp.server").warning("Error handling request")
    first, second = sink.getvalue().splitlines()
    assert first.startswith("timestamp='") and " level='info' event='api_listening' listen='127.0.0.1:8750'" in first
    assert " level='warning' event='library_log' " in second and "logger='aiohttp.server'" in second
    assert logs.line("warning", "stderr_backlog_full", dropped=3).endswith(
        " level='warning' event='stderr_backlog_full' dropped=3\n")


def test_every_event_the_code_names_is_snake_case() -> None:
    """The names are snake_case in the code itself (no processor rewrites a sentence): every structlog call
    in bot/ whose event is a string literal names a snake_case event."""
    def a_logger(e: ast.expr) -> bool:  # log, self.log, req.log, structlog.get_logger(...)
        name = e.attr if isinstance(e, ast.Attribute) else e.id if isinstance(e, ast.Name) else ""
        return "log" in name.lower() or (isinstance(e, ast.Call) and a_logger(e.func))

    bad = []
    for path in sorted(Path(logs.__file__).parents[1].rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args
                    and a_logger(node.func.value)
                    and node.func.attr in ("debug", "info", "warning", "error", "exception", "critical", "msg")
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
                    and not re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)*", node.args[0].value)):
                bad.append(f"{path}:{node.lineno}: {node.args[0].value!r}")
    assert not bad, "\n".join(bad)
