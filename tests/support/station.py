"""The station: a real Synapse, the bot account, alice (answerer), bob (not), carol, one room,
and the daemon as a subprocess driven through its config, HTTP API and the room."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from bot.demo.homeserver import Homeserver, free_port
from tests.support import forkserver
from tests.support.forkserver import Forked, exe_path
from tests.support.human import Human, content, rel

V2 = "dev.agentpod.permission.v2"
TOKEN = "test-api-token-5b7e"  # the old single api.token: both roles, as name "api.token"
# named tokens with roles ([[api.tokens]]), beside it
AGENT_TOKEN = ("agent-a", "test-agent-a-token-0c4d1f")
AGENT_B_TOKEN = ("agent-b", "test-agent-b-token-7e2a90")
DECIDER_TOKEN = ("alice-cli", "test-decider-token-3f8b62")
BOT_PASSWORD = "test-bot-password-91c2"


class Station:
    def __init__(self, hs: Homeserver, workdir: Path) -> None:
        self.hs = hs
        self.dir = workdir
        self.exe = exe_path()
        self.token = TOKEN
        self.api_port = free_port()
        self.api_url = f"http://127.0.0.1:{self.api_port}"
        self.daemon: subprocess.Popen[bytes] | Forked | None = None
        self.config_path = self.dir / "config.toml"
        self.state_dir = self.dir / "state"
        self.log_path = self.dir / "daemon.log"
        self.extra_config = ""
        self.env: dict[str, str] = {}  # the daemon's environment on top of ours (PERMISSION_BOT_DATABASE_URL)
        self.prompts: dict[str, Any] = {"timeout": "10m", "on_timeout": "reject"}
        # [api] caps on pending requests: the shared station's tests leave requests pending and floods hit
        # the in-progress budget; tests of the caps themselves (test_rooms_boundary_e2e) use the defaults
        self.caps: dict[str, int] = {"max_pending_per_token": 100_000, "max_pending_per_session": 100_000}

    async def setup(self) -> None:
        self.make_people_and_room()
        await self.start_all()

    def make_people_and_room(self) -> None:
        """The bot account, alice (answerer), bob (not), carol (power 50) and the station room."""
        self.bot_id = self.hs.register("permbot", BOT_PASSWORD)["user_id"]
        self.alice = Human(self.hs, "alice")
        self.bob = Human(self.hs, "bob")
        self.carol = Human(self.hs, "carol")
        self.room_id = self.hs.create_room(
            self.alice.token,
            invite=[self.bot_id, self.bob.user_id, self.carol.user_id],
            power={self.carol.user_id: 50},
        )

    async def start_all(self) -> None:
        """bob and carol join, everyone follows the room, the daemon starts and joins."""
        self.hs.join(self.bob.token, self.room_id)
        self.hs.join(self.carol.token, self.room_id)
        for h in (self.alice, self.bob, self.carol):  # bob and carol sync once a test looks (Human.follow)
            await h.start(self.room_id, follow=h is self.alice)
        self.write_config()
        self.start_daemon()
        await self.wait_healthy()
        ok = await self.alice.wait(
            lambda e: (
                e.get("type") == "m.room.member"
                and e.get("state_key") == self.bot_id
                and content(e).get("membership") == "join"
            ),
            60,
        )
        assert ok, "the bot did not join the station room"

    def config_text(self) -> str:
        return f"""
[matrix]
homeserver = "{self.hs.url}"
user_id = "{self.bot_id}"
password = "{BOT_PASSWORD}"
device_name = "permission-bot-tests"
room = "{self.room_id}"
sync_timeout = 5.0

[answerers]
users = ["{self.alice.user_id}"]

[api]
listen = "127.0.0.1:{self.api_port}"
token = "{TOKEN}"
{"".join(f"{k} = {v}" + chr(10) for k, v in self.caps.items())}
{self._named_tokens_toml()}

[state]
path = "{self.state_dir}"

[prompts]
{self._prompts_toml()}

[log]
level = "debug"
{self.extra_config}
"""

    @staticmethod
    def _named_tokens_toml() -> str:
        roles = [(AGENT_TOKEN, "agent"), (AGENT_B_TOKEN, "agent"), (DECIDER_TOKEN, "decider")]
        return "\n".join(
            f'[[api.tokens]]\nname = "{name}"\nrole = "{role}"\nsecret = "{secret}"' for (name, secret), role in roles
        )

    def _prompts_toml(self) -> str:
        return "\n".join(f"{k} = {json.dumps(v)}" for k, v in self.prompts.items())

    def write_config(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(self.config_text())

    def start_daemon(self) -> None:
        """``permission-bot run``, forked from this worker's fork server (tests/support/forkserver.py: the
        imports done once; ``PB_TESTS_EXEC=1``: the console script)."""
        with open(self.log_path, "ab") as out:
            self.daemon = forkserver.spawn(
                ["run", "--config", str(self.config_path)], log=out.fileno(), env={**os.environ, **self.env}
            )

    def kill_daemon(self) -> None:
        if self.daemon and self.daemon.poll() is None:
            self.daemon.kill()
            self.daemon.wait()

    def stop_daemon(self) -> None:
        if self.daemon and self.daemon.poll() is None:
            self.daemon.terminate()
            try:
                self.daemon.wait(20)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()

    async def restart_daemon(self, kill: bool = False) -> None:
        self.kill_daemon() if kill else self.stop_daemon()
        self.start_daemon()
        await self.wait_healthy()

    async def wait_healthy(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.daemon and self.daemon.poll() is not None:
                raise AssertionError(
                    f"daemon exited {self.daemon.returncode}: "
                    + self.log_path.read_text(errors="replace")[-1500:]
                )
            try:
                st, body = self.http("GET", "/healthz")
                if st == 200 and body.get("matrix_ready"):
                    return
            except Exception:
                pass
            await asyncio.sleep(0.1)
        raise AssertionError("daemon /healthz never became ready")

    def http(
        self,
        method: str,
        path: str,
        body: Any = None,
        token: str | None = TOKEN,
        raw: bytes | None = None,
        timeout: float = 70,
    ) -> tuple[int, Any]:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.api_url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                txt = r.read()
                return r.status, (json.loads(txt) if txt.strip() else None)
        except urllib.error.HTTPError as e:
            txt = e.read()
            try:
                return e.code, json.loads(txt)
            except ValueError:
                return e.code, txt.decode(errors="replace")

    async def ahttp(self, method: str, path: str, body: Any = None, **kw: Any) -> tuple[int, Any]:
        return await asyncio.to_thread(self.http, method, path, body, **kw)

    def cli(
        self, *args: str, timeout: float = 60, env: dict[str, str] | None = None, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        e = dict(os.environ, PERMISSION_BOT_URL=self.api_url, PERMISSION_BOT_TOKEN=TOKEN)
        if env:
            e.update(env)
        return forkserver.run(list(args), timeout=timeout, env=e, input=input)  # forked, as start_daemon

    def is_prompt(self, ev: dict[str, Any]) -> bool:
        c = content(ev)
        return (
            ev.get("type") == "m.room.message"
            and ev.get("sender") == self.bot_id
            and c.get("suite_event_type") == V2
            and rel(ev).get("rel_type") != "m.replace"
        )

    async def prompt_for(
        self, session_id: str, timeout: float = 30, seq: int | None = None, human: Human | None = None
    ) -> dict[str, Any] | None:
        h = human or self.alice

        def pred(e: dict[str, Any]) -> bool:
            c = content(e)
            return (
                self.is_prompt(e)
                and c.get("session_id") == session_id
                and (seq is None or c.get("request_seq") == seq)
            )

        return await h.wait(pred, timeout)

    async def edit_of(
        self, prompt_id: str, timeout: float = 20, human: Human | None = None
    ) -> dict[str, Any] | None:
        h = human or self.alice
        return await h.wait(
            lambda e: (
                e.get("sender") == self.bot_id
                and rel(e).get("rel_type") == "m.replace"
                and rel(e).get("event_id") == prompt_id
            ),
            timeout,
        )

    async def notice_after(
        self, start: int, timeout: float = 15, human: Human | None = None, contains: str = ""
    ) -> dict[str, Any] | None:
        h = human or self.alice
        return await h.wait(
            lambda e: (
                e.get("sender") == self.bot_id
                and content(e).get("msgtype") == "m.notice"
                and contains in content(e).get("body", "")
            ),
            timeout,
            start=start,
        )

    async def submit(self, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """POST a new request and wait for its prompt: (record, prompt event)."""
        st, rec = await self.ahttp("POST", "/permissions", body)
        assert st == 201, rec
        prompt = await self.prompt_for(body["sessionId"], seq=rec["request_seq"])
        assert prompt, "no prompt"
        return rec, prompt

    async def record(self, rid: str, wait: float = 15) -> dict[str, Any]:
        """The request's record, once no longer pending (or after ``wait`` seconds)."""
        st, rec = await self.ahttp("GET", f"/permissions/{rid}?wait={wait}")
        assert st == 200
        return dict(rec)

    async def drain(self, timeout: float = 30) -> None:
        """Cancel whatever is pending, so a plain answer has one prompt to go to; then wait until the
        room shows every prompt settled (a plain answer binds only when nothing changed above it); it fails
        when the room does not within ``timeout``."""
        _, pending = await self.ahttp("GET", "/permissions")
        for r in pending:
            await self.ahttp("POST", f"/permissions/{r['id']}", {"decision": "cancel"})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            edited = {rel(e).get("event_id") for e in self.alice.events
                      if e.get("sender") == self.bot_id and rel(e).get("rel_type") == "m.replace"}
            # a prompt posted settled (a session rule's, say) carries its resolution and is never edited
            if all(e["event_id"] in edited or content(e).get("resolution")
                   for e in self.alice.events if self.is_prompt(e)):
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"drain: prompts still unsettled in the room after {timeout:g} s")

    async def teardown(self) -> None:
        for h in (getattr(self, "alice", None), getattr(self, "bob", None), getattr(self, "carol", None)):
            if h:
                await h.close()
        self.stop_daemon()


_SUFFIXES: set[str] = set()  # the account suffixes this process's stations took (one homeserver per process)


def own_suffix(base: str) -> str:
    """``base``, or ``base2``, ``base3`` ... when a station of this process took it: two files whose stations
    share a class (and so a suffix) may run in one pytest worker, against one homeserver."""
    n, suffix = 1, base
    while suffix in _SUFFIXES:
        n += 1
        suffix = f"{base}{n}"
    _SUFFIXES.add(suffix)
    return suffix


class OwnStation(Station):
    """A station with accounts of its own (``permbot`` + ``suffix``, ``alice`` + ``suffix``, ...), so that it can
    run beside the session's station on one homeserver."""

    suffix = "own"

    def room_power(self) -> dict[str, int] | None:
        """Power levels the station room starts with (None: the homeserver's default)."""
        return None

    def make_people_and_room(self) -> None:
        self.suffix = own_suffix(self.suffix)
        self.bot_id = self.hs.register(f"permbot{self.suffix}", BOT_PASSWORD)["user_id"]
        self.alice, self.bob, self.carol = (Human(self.hs, f"{n}{self.suffix}") for n in ("alice", "bob", "carol"))
        self.room_id = self.hs.create_room(
            self.alice.token, invite=[self.bot_id, self.bob.user_id, self.carol.user_id], power=self.room_power()
        )


def request_body(
    session_id: str,
    *,
    title: str = "Run the test suite",
    command: str = "bun test",
    kind: str = "execute",
    options: list[tuple[str, str, str]] | None = None,
    tool_call_id: str = "call_1",
    key: str | None = None,
) -> dict[str, Any]:
    """An ACP session/request_permission params object, as a harness would submit it."""
    opts = options or [
        ("allow_once", "Allow once", "allow_once"),
        ("allow_always", "Always allow", "allow_always"),
        ("reject_once", "Reject", "reject_once"),
        ("reject_always", "Never allow", "reject_always"),
    ]
    body: dict[str, Any] = {
        "sessionId": session_id,
        "toolCall": {
            "toolCallId": tool_call_id,
            "title": title,
            "kind": kind,
            "rawInput": {"command": command},
            "locations": [{"path": "apps/hub"}],
        },
        "options": [{"optionId": o, "name": n, "kind": k} for o, n, k in opts],
    }
    if key:
        body["key"] = key
    return body
