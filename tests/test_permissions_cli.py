"""`permission-bot permissions ls|approve|deny|watch`, run as a separate process.

- e2e: against the real daemon + Synapse through the session-scoped ``station`` fixture
  (tests/conftest.py), with the console script ``station.exe``.
- The rest: argument handling and error paths with no daemon at all, plus a few paths that the
  real daemon cannot be made to produce on demand (a 404 race inside ``watch``, a broken daemon),
  against a tiny in-process stand-in that follows docs/design.md.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import signal
import socket
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

OPTS = [
    {"optionId": "ok", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "no", "name": "Reject", "kind": "reject_once"},
    {"optionId": "never", "name": "Never allow", "kind": "reject_always"},
]
REJECT_ONLY = [{"optionId": "no", "name": "Reject", "kind": "reject_once"}]
ALLOW_ONLY = [{"optionId": "ok", "name": "Allow once", "kind": "allow_once"}]
STANDALONE = [sys.executable, "-m", "bot.cli.permissions"]


@dataclass
class Ran:
    rc: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


def _env(url: str | None, token: str | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PERMISSION_BOT_URL", "PERMISSION_BOT_TOKEN")}
    if url is not None:
        env["PERMISSION_BOT_URL"] = url
    if token is not None:
        env["PERMISSION_BOT_TOKEN"] = token
    env.update(extra or {})
    return env


def _as_in_a_terminal() -> None:
    """Ctrl-C reaches the command as it would in a terminal's foreground: a pytest started as a background job
    of a non-interactive shell (``pytest &``) ignores SIGINT and SIGQUIT, and its children inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


async def start(cmd: list[str], env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *cmd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
        env=env,
        preexec_fn=_as_in_a_terminal,
    )


async def finish(proc: asyncio.subprocess.Process, timeout: float = 60) -> Ran:
    try:
        out, err = await asyncio.wait_for(asyncio.shield(comm := asyncio.ensure_future(proc.communicate())), timeout)
    except TimeoutError:  # say what the process was doing (its state, signal masks, output): then end it
        state = _proc_state(proc.pid)
        proc.kill()
        out, err = await comm
        raise AssertionError(f"still running after {timeout} s ({state}); stdout {out!r}, stderr {err!r}") from None
    assert proc.returncode is not None
    return Ran(proc.returncode, out.decode(), err.decode())


def _proc_state(pid: int) -> str:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        wchan = Path(f"/proc/{pid}/wchan").read_text()
    except OSError as e:
        return f"no /proc entry: {e}"
    keep = [line for line in status.splitlines() if line.split(":")[0] in ("State", "SigBlk", "SigIgn", "SigCgt")]
    return "; ".join([*keep, f"wchan {wchan}"])


async def run(cmd: list[str], env: dict[str, str], timeout: float = 60) -> Ran:
    return await finish(await start(cmd, env), timeout)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fresh(prefix: str = "cli") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


# ================================================================ no daemon at all

DEAD = "http://127.0.0.1:9"  # discard port: nothing listens


@pytest.mark.parametrize(
    "args",
    [
        ["ls"],
        ["ls", "--json"],
        ["approve", "s:1"],
        ["deny", "s:1", "--json"],
        ["watch", "--allow-tool", "x", "--once"],
    ],
)
async def test_unreachable_daemon_exits_1_with_one_line(args: list[str]) -> None:
    r = await run([*STANDALONE, *args], _env(DEAD, None))
    assert r.rc == 1, r
    assert r.out == ""
    assert r.err.strip().count("\n") == 0
    assert r.err.startswith(f"permission-bot: cannot reach the permission-bot daemon at {DEAD}: ")
    assert "is `permission-bot run` up? set --url or PERMISSION_BOT_URL" in r.err


async def test_url_flag_wins_over_env_and_default() -> None:
    r = await run([*STANDALONE, "ls", "--url", "http://127.0.0.1:7/"], _env(DEAD, None))
    assert "at http://127.0.0.1:7: " in r.err
    port = free_port()
    r = await run([*STANDALONE, "ls"], _env(None, None))
    assert r.rc in (0, 1)  # a daemon might really listen on 8750; if not, the default is named
    if r.rc == 1:
        assert "http://127.0.0.1:8750" in r.err
    r = await run([*STANDALONE, "ls"], _env(f"http://127.0.0.1:{port}", None))
    assert r.rc == 1 and f"127.0.0.1:{port}" in r.err


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["ls", "--url", "localhost:8750"], "--url must look like http://HOST:PORT"),
        (["watch"], "watch needs at least one rule"),
        (["watch", "--rules-json", "[]"], "watch needs at least one rule"),
        (["watch", "--session", "s1"], "watch needs at least one rule"),
        (["watch", "--rules-json", "{"], "--rules-json: invalid JSON"),
        (
            ["watch", "--rules-json", '[{"match": {}, "decision": "approve"}]'],
            "rule 1: match: needs at least",
        ),
        (["watch", "--rules-json", "@/no/such/rules.json"], "cannot read the file"),
        (["watch", "--allow-tool", ""], "--allow-tool: the pattern is empty"),
        (["watch", "--allow-tool", "x", "--interval", "0"], "--interval: must be more than zero"),
        (["watch", "--allow-tool", "x", "--interval", "soon"], "--interval: not a duration"),
        (["watch", "--allow-tool", "x", "--timeout", "-1"], "--timeout"),
        (["approve"], "the following arguments are required: ID"),
        (["deny", "x", "--always"], "unrecognized arguments: --always"),
        (["frobnicate"], "invalid choice"),
    ],
)
async def test_usage_errors_exit_2(args: list[str], needle: str) -> None:
    r = await run([*STANDALONE, *args], _env(DEAD, None))
    assert r.rc == 2, r
    assert needle in r.err
    assert "cannot reach" not in r.err  # rules and flags are checked before any request


# ================================================================ a stand-in daemon (docs/design.md)


class Fake:
    """Just enough of the API for the CLI: list, get, decide, with a token and a 404 race switch."""

    def __init__(self) -> None:
        self.token = "fake-token"
        self.records: dict[str, dict[str, Any]] = {}
        self.gone: set[str] = set()  # POSTs on these answer 404, as if someone else was first
        self.posts: list[tuple[str, dict[str, Any]]] = []
        self.seq = 0
        self.url = ""
        self.lists = 0  # GET /permissions calls answered

    def add(self, session: str, title: str, command: str = "ls", options: Any = None, **extra: Any) -> str:
        self.seq += 1
        rid = f"{session}:{self.seq}"
        raw = {"command": command}
        self.records[rid] = {
            "id": rid,
            "session_id": session,
            "label": extra.get("label"),
            "title": title,
            "tool_kind": "execute",
            "tool_name": title,
            "options": options or OPTS,
            "raw_input": raw,
            "state": "pending",
            "requested_at": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(time.time() - 75)),
            "outcome": None,
            "sessionId": session,
            "toolName": title,
            "text": f'Allow "{title}"?',
            "rawInput": raw,
        }
        return rid

    async def list(self, req: web.Request) -> web.Response:
        self.lists += 1
        s = req.query.get("session")
        out = [
            r
            for r in self.records.values()
            if r["state"] == "pending" and (s is None or s in (r["session_id"], r["label"]))
        ]
        return web.json_response(out)

    async def get(self, req: web.Request) -> web.Response:
        r = self.records.get(req.match_info["id"])
        if r is None:
            return web.json_response({"error": "not_found", "reason": "no such request"}, status=404)
        return web.json_response(r)

    async def decide(self, req: web.Request) -> web.Response:
        if req.headers.get("Authorization") != f"Bearer {self.token}":
            return web.json_response({"error": "unauthorized", "reason": "bad token"}, status=401)
        rid = req.match_info["id"]
        body = await req.json()
        self.posts.append((rid, body))
        r = self.records.get(rid)
        if r is None or r["state"] != "pending" or rid in self.gone:
            return web.json_response({"error": "not_found", "reason": "not pending"}, status=404)
        kinds = {o["kind"]: o["optionId"] for o in r["options"]}
        if body.get("option_id"):
            oid = body["option_id"]
        elif body["decision"] == "approve":
            oid = kinds.get("allow_always" if body.get("scope") == "always" else "allow_once")
            if oid is None:
                return web.json_response({"error": "no_fitting_option", "reason": "no allow option"}, status=409)
        else:
            oid = kinds.get("reject_once")
        r["state"] = "resolved" if oid else "cancelled"
        name = next((o["name"] for o in r["options"] if o["optionId"] == oid), None)
        r["outcome"] = {
            "option_id": oid,
            "option_name": name,
            "answered_by": body.get("by"),
            "via": "api",
            "feedback": body.get("feedback"),
        }
        return web.json_response(r)

    async def serve(self, port: int) -> web.AppRunner:
        app = web.Application()
        app.router.add_get("/permissions", self.list)
        app.router.add_get("/permissions/{id}", self.get)
        app.router.add_post("/permissions/{id}", self.decide)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        self.url = f"http://127.0.0.1:{port}"
        return runner


@pytest.fixture
async def fake() -> AsyncIterator[Fake]:
    f = Fake()
    runner = await f.serve(free_port())
    yield f
    await runner.cleanup()


async def fk(fake: Fake, *args: str, extra: dict[str, str] | None = None) -> Ran:
    return await run([*STANDALONE, *args], _env(fake.url, fake.token, extra))


async def test_fake_table_is_one_line_per_row_and_terminal_safe(fake: Fake) -> None:
    fake.add("s1", "Bash", command="echo " + "x" * 400 + "\n\x1b[31mred\x1b[0m", label="my-agent")
    fake.add("s1", "Wr\u202eite\tnow", command="true")
    r = await fk(fake, "ls", extra={"COLUMNS": "100"})
    assert r.rc == 0, r
    head, *rows = r.lines
    assert head.split() == ["ID", "SESSION", "TOOL", "AGE", "QUESTION"]
    assert len(rows) == 2
    assert all(len(line) <= 100 for line in r.lines)
    assert rows[0].startswith("s1:1") and "my-agent" in rows[0] and "1m" in rows[0]
    assert rows[0].split()[4].startswith("echo") and rows[0].endswith("…")  # the command first
    assert "\x1b" not in r.out and "\u202e" not in r.out and "\t" not in r.out
    assert "s2" not in r.out


async def test_fake_ls_json_and_empty(fake: Fake) -> None:
    r = await fk(fake, "ls", "--json")
    assert (r.rc, json.loads(r.out)) == (0, [])
    r = await fk(fake, "ls")
    assert (r.rc, r.out) == (0, "no pending permission requests\n")
    rid = fake.add("s1", "Bash", command="\x1b]0;pwn\x07")
    r = await fk(fake, "ls", "--json")
    [got] = json.loads(r.out)
    assert got == fake.records[rid]
    assert "\x1b" not in r.out  # JSON escapes controls


async def test_fake_watch_reports_a_lost_race_and_goes_on(fake: Fake) -> None:
    a = fake.add("s1", "Bash")
    b = fake.add("s1", "Read")
    fake.gone.add(a)
    r = await fk(fake, "watch", "--allow-tool", "*", "--once")
    assert r.rc == 0, r
    assert r.lines == [
        f"skipped {a} (Bash): HTTP 404, already answered elsewhere",
        f"approved {b} (Read) by rule 1",
    ]
    r = await fk(fake, "watch", "--allow-tool", "*", "--once", "--json")
    assert r.rc == 0 and [json.loads(x)["result"] for x in r.lines] == ["skipped"]


async def test_fake_watch_body_and_order_of_flags(fake: Fake) -> None:
    a = fake.add("s1", "Bash")
    r = await fk(fake, "watch", "--allow-tool", "B*", "--deny-tool", "Bash", "--always", "--once")
    assert r.lines == [f"denied {a} (Bash) by rule 2"]
    assert fake.posts == [(a, {"decision": "deny", "by": "watch"})]
    b = fake.add("s1", "Bash")
    fake.posts.clear()
    r = await fk(fake, "watch", "--allow-tool", "B*", "--always", "--once")
    assert r.lines == [f"approved {b} (Bash) by rule 1"]
    assert fake.posts == [(b, {"decision": "approve", "by": "watch", "scope": "always"})]
    assert fake.records[b]["outcome"]["option_id"] == "always"


async def test_watch_keeps_to_its_timeout_when_the_daemon_never_answers() -> None:
    """A daemon that accepts and then says nothing: one hanging call may not outlast ``--timeout``."""
    held: list[asyncio.StreamWriter] = []

    async def hold(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        held.append(w)

    port = free_port()
    server = await asyncio.start_server(hold, "127.0.0.1", port)
    try:
        env = _env(f"http://127.0.0.1:{port}", "t")
        began = time.monotonic()
        r = await run([*STANDALONE, "watch", "--allow-tool", "Bash", "--timeout", "2s"], env, timeout=25)
        took = time.monotonic() - began
    finally:
        server.close()
        for w in held:
            w.close()
    assert r.rc == 1 and r.lines == [] and "timed out" in r.err, r  # never answered once: a clear error
    assert took < 20, took  # when --timeout ends, not after the client's 30 s per call


async def _go_away(runner: web.AppRunner) -> None:
    """Stop listening, let connections already accepted reach the server, then close them all (a bare
    ``cleanup`` under load can leave a just-accepted connection open and never answered)."""
    for site in list(runner.sites):
        await site.stop()
    await asyncio.sleep(0.3)
    await runner.cleanup()


async def test_watch_rides_out_a_daemon_restart() -> None:
    f = Fake()
    port = free_port()
    runner = await f.serve(port)
    env = _env(f.url, f.token)
    proc = await start([*STANDALONE, "watch", "--allow-tool", "Bash", "--interval", "0.1s", "--timeout", "90s"], env)
    assert proc.stdout is not None and proc.stderr is not None
    err_before = b""
    try:
        await wait_until(lambda: f.lists > 0, 60)  # the watch is up and asking (however slow its start) ...
        await _go_away(runner)  # ... then the daemon goes away ...
        while b"cannot reach the permission-bot daemon" not in err_before:  # ... the watch notices ...
            err_before += await asyncio.wait_for(proc.stderr.readline(), 60)
        runner = await f.serve(port)  # ... and it comes back
        rid = f.add("s1", "Bash")
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        proc.send_signal(signal.SIGINT)  # Ctrl-C: a watch ends with 0
        r = await finish(proc, 30)
    finally:
        await runner.cleanup()
    assert r.rc == 0, r
    assert [line.decode().rstrip("\n"), *r.lines] == [f"approved {rid} (Bash) by rule 1"]
    err = err_before.decode() + r.err
    assert err.count("cannot reach the permission-bot daemon") == 1
    assert "answers again" in err


async def wait_until(cond: Callable[[], bool], timeout: float) -> None:
    """Until ``cond()`` holds (checked every 50 ms); AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.05)


async def test_fake_watch_bad_token_is_fatal(fake: Fake) -> None:
    fake.add("s1", "Bash")
    r = await run([*STANDALONE, "watch", "--allow-tool", "*", "--timeout", "10s"], _env(fake.url, "nope"))
    assert r.rc == 1
    assert "HTTP 401" in r.err and "token" in r.err


async def test_fake_non_json_answer(fake: Fake) -> None:
    r = await run([*STANDALONE, "ls", "--url", fake.url + "/nothing-here"], _env(None, None))
    assert r.rc == 1 and "HTTP 404" in r.err


# ================================================================ e2e: the real daemon


def st_http(station: Any, method: str, path: str, body: object = None) -> Any:
    return station.http(method, path, body)


async def http(station: Any, method: str, path: str, body: object = None) -> tuple[int, Any]:
    res = await asyncio.to_thread(st_http, station, method, path, body)
    if inspect.isawaitable(res):
        res = await res
    status, data = res
    return int(status), data


_SUBMITTED: list[str] = []


@pytest.fixture(autouse=True)
async def _settle_leftovers(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """Leave no request of ours pending in the shared station, even when a test fails midway."""
    yield
    if "station" in request.fixturenames and _SUBMITTED:
        station = request.getfixturevalue("station")
        for rid in _SUBMITTED:
            await http(station, "POST", f"/permissions/{rid}", {"decision": "deny", "by": "test-cleanup"})
        _SUBMITTED.clear()


async def submit(
    station: Any,
    session: str,
    title: str = "Bash",
    command: str = "ls",
    options: list[dict[str, str]] | None = None,
    kind: str = "execute",
    call: str = "t1",
    **extra: Any,
) -> dict[str, Any]:
    body = {
        "sessionId": session,
        "toolCall": {
            "toolCallId": call,
            "title": title,
            "kind": kind,
            "rawInput": {"command": command},
            "_meta": {"claudeCode": {"toolName": title}},  # the harness's tool name: what rules match
        },
        "options": options if options is not None else OPTS,
        **extra,
    }
    status, rec = await http(station, "POST", "/permissions", body)
    assert status in (200, 201), (status, rec)
    assert isinstance(rec, dict) and rec["state"] == "pending"
    _SUBMITTED.append(rec["id"])
    return rec


async def record(station: Any, rid: str) -> dict[str, Any]:
    status, rec = await http(station, "GET", f"/permissions/{rid}")
    assert status == 200, (status, rec)
    assert isinstance(rec, dict)
    return rec


async def pb(station: Any, *args: str, token: str | None = "", env: bool = True, timeout: float = 60) -> Ran:
    """Run ``permission-bot permissions ARGS`` with the daemon found through the environment."""
    tok = station.token if token == "" else token
    e = _env(station.api_url, tok) if env else _env(None, None)
    return await run([station.exe, "permissions", *args], e, timeout)


async def pb_start(station: Any, *args: str) -> asyncio.subprocess.Process:
    return await start([station.exe, "permissions", *args], _env(station.api_url, station.token))


e2e = pytest.mark.e2e


@e2e
async def test_ls_empty_session(station: Any) -> None:
    s = fresh()
    r = await pb(station, "ls", "--session", s)
    assert (r.rc, r.out) == (0, f"no pending permission requests in session {s}\n")
    r = await pb(station, "ls", "--session", s, "--json")
    assert (r.rc, json.loads(r.out)) == (0, [])


@e2e
async def test_ls_table_and_json(station: Any) -> None:
    s = fresh()
    a = await submit(station, s, "Bash", command="bun test")
    b = await submit(station, s, "Write", command="x" * 500, kind="edit", call="t2")
    r = await pb(station, "ls", "--session", s)
    assert r.rc == 0, r
    head, *rows = r.lines
    assert head.split() == ["ID", "SESSION", "TOOL", "AGE", "QUESTION"]
    assert [row.split()[0] for row in rows] == [a["id"], b["id"]]  # oldest first
    assert rows[0].split()[1:3] == [s, "Bash"]
    assert "bun test — Bash" in rows[0]  # the command first, then the title
    assert rows[1].endswith("…") and len(rows[1]) <= 160
    # all sessions, --url instead of the environment: ours are there, one line each
    r = await run([station.exe, "permissions", "ls", "--url", station.api_url], _env(None, station.token))
    assert r.rc == 0 and sum(a["id"] in x for x in r.lines) == 1
    r = await pb(station, "ls", "--json", "--session", s)
    recs = json.loads(r.out)
    assert [x["id"] for x in recs] == [a["id"], b["id"]]
    for x in recs:
        for key in (
            "id",
            "session_id",
            "title",
            "options",
            "raw_input",
            "state",
            "requested_at",
            "sessionId",
        ):
            assert key in x
    assert recs[0]["raw_input"] == {"command": "bun test"} and recs[0]["rawInput"] == {"command": "bun test"}
    await http(station, "POST", f"/permissions/{a['id']}", {"decision": "deny"})
    await http(station, "POST", f"/permissions/{b['id']}", {"decision": "deny"})


@e2e
async def test_ls_shows_whole_uuid_ids_and_a_unique_prefix_is_taken(station: Any) -> None:
    """Claude Code's session ids are UUIDs: the id ls shows is the whole one (pasting it works), and any
    unique prefix of a pending id works too."""
    s = str(uuid.uuid4())
    a = await submit(station, s, "Bash", command="make")
    b = await submit(station, s, "Bash", command="make install", call="t2")
    r = await run([station.exe, "permissions", "ls", "--url", station.api_url],
                  {**_env(None, station.token), "COLUMNS": "80"})
    assert r.rc == 0, r
    shown = [row.split()[0] for row in r.lines[1:] if row.startswith(s)]
    assert shown == [a["id"], b["id"]] and len(a["id"]) > 36  # whole, even on an 80-column terminal
    r = await pb(station, "approve", shown[0])
    assert r.rc == 0 and (await record(station, a["id"]))["state"] == "resolved", r
    r = await pb(station, "deny", b["id"][:-2])  # a unique prefix of a pending id
    assert r.rc == 0 and b["id"] in r.out, r
    assert (await record(station, b["id"]))["outcome"]["option_id"] == "no"


@e2e
async def test_ls_session_by_label(station: Any) -> None:
    s, label = fresh(), fresh("label")
    a = await submit(station, s, label=label)
    r = await pb(station, "ls", "--session", label)
    assert r.rc == 0 and a["id"] in r.out and label in r.out
    r = await pb(station, "ls", "--session", label, "--json")
    assert [x["id"] for x in json.loads(r.out)] == [a["id"]]
    await http(station, "POST", f"/permissions/{a['id']}", {"decision": "deny"})


@e2e
async def test_approve_default_picks_allow_once_and_edits_the_prompt(station: Any) -> None:
    s = fresh()
    a = await submit(station, s)
    rid = a["id"]

    def is_prompt(e: dict[str, Any]) -> bool:
        c = e.get("content") or {}
        return (
            e.get("sender") == station.bot_id
            and c.get("request_id") == rid
            and (c.get("m.relates_to") or {}).get("rel_type") != "m.replace"
        )

    prompt = await station.alice.wait(is_prompt, 30)
    assert prompt, "no prompt in the room"
    r = await pb(station, "approve", rid)
    assert (r.rc, r.out, r.err) == (0, f"approved {rid} with ok (Allow once)\n", "")
    got = await record(station, rid)
    assert got["state"] == "resolved"
    assert got["outcome"]["option_id"] == "ok" and got["outcome"]["via"] == "api"
    assert got["outcome"]["answered_by"] == "api:api.token"  # the token's name, never what the CLI says

    def is_edit(e: dict[str, Any]) -> bool:
        c = e.get("content") or {}
        rel = c.get("m.relates_to") or {}
        new = c.get("m.new_content") or {}
        return (
            e.get("sender") == station.bot_id
            and rel.get("rel_type") == "m.replace"
            and rel.get("event_id") == prompt["event_id"]
            and (new.get("resolution") or {}).get("via") == "api"
        )

    assert await station.alice.wait(is_edit, 30), "the prompt was not edited with an api resolution"


@e2e
async def test_approve_always_option_id_feedback_json(station: Any) -> None:
    s = fresh()
    a = await submit(station, s, call="t1")
    b = await submit(station, s, call="t2")
    r = await pb(station, "approve", a["id"], "--always")
    assert (r.rc, r.out) == (0, f"approved {a['id']} with always (Always allow)\n")
    r = await pb(station, "approve", b["id"], "--option-id", "no", "--feedback", "use rg instead", "--json")
    assert r.rc == 0, r
    out = json.loads(r.out)
    assert out["id"] == b["id"] and out["state"] == "resolved"
    assert out["outcome"]["option_id"] == "no" and out["outcome"]["feedback"] == "use rg instead"
    # --always with no allow_always offered falls back to allow-once
    c = await submit(station, s, call="t3", options=ALLOW_ONLY)
    r = await pb(station, "approve", c["id"], "--always")
    assert (r.rc, r.out) == (0, f"approved {c['id']} with ok (Allow once)\n")


@e2e
async def test_deny_variants(station: Any) -> None:
    s = fresh()
    a = await submit(station, s, call="t1")
    r = await pb(station, "deny", a["id"])
    assert (r.rc, r.out) == (0, f"denied {a['id']} with no (Reject)\n")
    b = await submit(station, s, call="t2", options=ALLOW_ONLY)
    r = await pb(station, "deny", b["id"])
    assert (r.rc, r.out) == (0, f"denied {b['id']}: cancelled (no reject-flavoured option offered)\n")
    got = await record(station, b["id"])
    assert got["state"] == "cancelled" and got["outcome"]["option_id"] is None
    c = await submit(station, s, call="t3")
    r = await pb(station, "deny", c["id"], "--option-id", "never", "--feedback", "not on main", "--json")
    assert r.rc == 0, r
    out = json.loads(r.out)
    assert out["outcome"]["option_id"] == "never" and out["outcome"]["feedback"] == "not on main"


@e2e
async def test_404_unknown_and_already_resolved(station: Any) -> None:
    s = fresh()
    r = await pb(station, "approve", f"{s}:9")
    assert r.rc == 1 and r.out == ""
    assert r.err == f"permission-bot: HTTP 404: no pending request {s}:9 (unknown id; see permissions ls)\n"
    r = await pb(station, "deny", f"{s}:9", "--json")
    assert r.rc == 1 and "HTTP 404" in r.err
    a = await submit(station, s)
    assert (await pb(station, "approve", a["id"])).rc == 0
    for verb in ("approve", "deny"):
        r = await pb(station, verb, a["id"])
        assert r.rc == 1 and r.out == ""
        assert f"HTTP 404: no pending request {a['id']} (already resolved" in r.err


@e2e
async def test_409_no_allow_option(station: Any) -> None:
    s = fresh()
    a = await submit(station, s, options=REJECT_ONLY)
    r = await pb(station, "approve", a["id"])
    assert r.rc == 1 and r.out == ""
    assert f"permission-bot: HTTP 409: {a['id']} offers no allow-flavoured option; pass --option-id" in r.err
    r = await pb(station, "approve", a["id"], "--option-id", "nope")
    assert r.rc == 1 and f"HTTP 409: {a['id']} does not offer option nope; offered: no" in r.err
    r = await pb(station, "approve", a["id"], "--option-id", "no")  # an exact pick overrides the mapping
    assert (r.rc, r.out) == (0, f"approved {a['id']} with no (Reject)\n")


@e2e
async def test_401_bad_or_missing_token(station: Any) -> None:
    s = fresh()
    a = await submit(station, s)
    r = await pb(station, "approve", a["id"], token="wrong-token")
    assert r.rc == 1 and "HTTP 401" in r.err and "token" in r.err
    r = await pb(station, "deny", a["id"], token=None)
    assert r.rc == 1 and "HTTP 401: no API token" in r.err
    r = await run(
        [station.exe, "permissions", "deny", a["id"], "--url", station.api_url, "--token", "wrong"],
        _env(None, station.token),  # --token wins over the environment
    )
    assert r.rc == 1 and "HTTP 401" in r.err
    r = await pb(station, "ls", "--session", s, token=None)  # reads need a token too
    assert r.rc == 1 and "HTTP 401: no API token" in r.err
    assert (await record(station, a["id"]))["state"] == "pending"
    r = await run(
        [station.exe, "permissions", "deny", a["id"], "--url", station.api_url, "--token", station.token],
        _env(None, None),
    )
    assert r.rc == 0, r


@e2e
async def test_unreachable_through_console_script(station: Any) -> None:
    r = await run([station.exe, "permissions", "ls"], _env(DEAD, station.token))
    assert r.rc == 1
    assert "cannot reach the permission-bot daemon at http://127.0.0.1:9" in r.err


@e2e
async def test_watch_needs_a_rule(station: Any) -> None:
    r = await pb(station, "watch", "--once")
    assert r.rc == 2 and "at least one rule" in r.err


@e2e
async def test_watch_once_deny_wins_and_unmatched_stays(station: Any) -> None:
    s = fresh()
    a = await submit(station, s, "Bash", call="t1")
    b = await submit(station, s, "Write", kind="edit", call="t2")
    c = await submit(station, s, "Fetch", kind="fetch", call="t3")
    r = await pb(station, "watch", "--session", s, "--allow-tool", "*", "--deny-tool", "Bash", "--once")
    assert r.rc == 0, r
    assert r.lines == [
        f"denied {a['id']} (Bash) by rule 2",
        f"approved {b['id']} (Write) by rule 1",
        f"approved {c['id']} (Fetch) by rule 1",
    ]
    ra, rb = await record(station, a["id"]), await record(station, b["id"])
    assert ra["outcome"]["option_id"] == "no" and ra["outcome"]["via"] == "api"  # the daemon says how, not watch
    assert rb["outcome"]["option_id"] == "ok" and rb["outcome"]["via"] == "api"
    assert ra["outcome"]["answered_by"] == "api:api.token"
    d = await submit(station, s, "Fetch", kind="fetch", call="t4")
    r = await pb(station, "watch", "--session", s, "--allow-tool", "Write", "--deny-tool", "Bash", "--once")
    assert (r.rc, r.out) == (0, "")
    assert (await record(station, d["id"]))["state"] == "pending"
    await http(station, "POST", f"/permissions/{d['id']}", {"decision": "deny"})


@e2e
async def test_watch_dry_run_settles_nothing_and_reports_once(station: Any) -> None:
    s = fresh()
    a = await submit(station, s, "Bash")
    r = await pb(
        station,
        "watch",
        "--session",
        s,
        "--deny-tool",
        "Bash",
        "--dry-run",
        "--interval",
        "0.2s",
        "--timeout",
        "1.5s",
    )
    assert r.rc == 0, r
    assert r.lines == [f"would deny {a['id']} (Bash) by rule 1"]
    r = await pb(station, "watch", "--session", s, "--allow-tool", "Ba*", "--dry-run", "--once", "--json")
    [line] = [json.loads(x) for x in r.lines]
    assert line["result"] == "would_approve" and line["id"] == a["id"] and line["dry_run"] is True
    assert line["rule"] == 1 and line["rule_spec"]["match"] == {"toolName": "Ba*", "sessionId": s}
    assert (await record(station, a["id"]))["state"] == "pending"
    await http(station, "POST", f"/permissions/{a['id']}", {"decision": "deny"})


@e2e
async def test_watch_session_restricts_rules(station: Any) -> None:
    s1, s2 = fresh(), fresh()
    a = await submit(station, s1)
    b = await submit(station, s2)
    r = await pb(station, "watch", "--session", s1, "--allow-tool", "*", "--once")
    assert r.lines == [f"approved {a['id']} (Bash) by rule 1"]
    assert (await record(station, b["id"]))["state"] == "pending"
    # --label restricts to the label the proxy set, and --always reaches approve rules
    s3, label = fresh(), fresh("label")
    c = await submit(station, s3, label=label)
    r = await pb(station, "watch", "--session", label, "--allow-tool", "Bash", "--always", "--once")
    assert r.lines == []  # --session is the session id only: a label is not a session
    r = await pb(station, "watch", "--label", label, "--allow-tool", "Bash", "--always", "--once")
    assert r.lines == [f"approved {c['id']} (Bash) by rule 1"]
    assert (await record(station, c["id"]))["outcome"]["option_id"] == "always"
    await http(station, "POST", f"/permissions/{b['id']}", {"decision": "deny"})


@e2e
async def test_watch_rules_json_inline_and_file(station: Any, tmp_path: Path) -> None:
    s = fresh()
    a = await submit(station, s, "ExitPlanMode", kind="other", call="t1")
    b = await submit(station, s, "Bash", call="t2")
    rules = [
        {"match": {"toolName": "ExitPlanMode", "sessionId": s}, "decision": "approve", "scope": "always"},
        {"match": {"sessionId": s}, "decision": "deny", "optionId": "never"},
    ]
    r = await pb(station, "watch", "--rules-json", json.dumps(rules[:1]), "--once", "--json")
    assert r.rc == 0, r
    [line] = [json.loads(x) for x in r.lines]
    assert line["result"] == "approved" and line["id"] == a["id"] and line["option_id"] == "always"
    assert line["rule"] == 1 and line["decision"] == "approve" and line["dry_run"] is False
    f = tmp_path / "rules.json"
    f.write_text(json.dumps(rules))
    r = await pb(station, "watch", "--rules-json", f"@{f}", "--once")
    assert r.lines == [f"denied {b['id']} (Bash) by rule 2"]
    assert (await record(station, b["id"]))["outcome"]["option_id"] == "never"


@e2e
async def test_watch_timeout_picks_up_new_requests_and_stops(station: Any) -> None:
    s = fresh()
    t0 = time.monotonic()
    proc = await pb_start(
        station, "watch", "--session", s, "--allow-tool", "Bash", "--interval", "0.2s", "--timeout", "4s"
    )
    await asyncio.sleep(1.0)
    a = await submit(station, s)
    r = await finish(proc, 30)
    elapsed = time.monotonic() - t0
    assert r.rc == 0, r
    assert r.lines == [f"approved {a['id']} (Bash) by rule 1"]  # acted on once, though seen on many polls
    assert 3.5 <= elapsed < 20
    assert (await record(station, a["id"]))["outcome"]["via"] == "api"


@e2e
async def test_watch_ctrl_c_exits_0_quietly(station: Any) -> None:
    proc = await pb_start(station, "watch", "--session", fresh(), "--allow-tool", "*", "--interval", "0.2s")
    await asyncio.sleep(2.0)
    proc.send_signal(signal.SIGINT)
    r = await finish(proc, 20)
    assert (r.rc, r.out, r.err) == (0, "", "")


@e2e
async def test_watch_survives_an_answer_elsewhere(station: Any) -> None:
    """Whatever another answerer settles first never reaches the watch as pending."""
    s = fresh()
    a = await submit(station, s)
    await http(station, "POST", f"/permissions/{a['id']}", {"decision": "deny"})
    r = await pb(station, "watch", "--session", s, "--allow-tool", "*", "--once")
    assert (r.rc, r.out) == (0, "")
