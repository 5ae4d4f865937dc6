"""The station: a real Synapse, the bot account, alice (answerer), bob (not), carol, one room,
and the daemon as a subprocess driven through its config, HTTP API and the room."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from bot.demo.homeserver import Homeserver, free_port
from tests.support import forkserver
from tests.support.forkserver import Forked, exe_path
from tests.support.human import Human, content, rel
from tests.support.station_api import AGENT_B_TOKEN, AGENT_TOKEN, DECIDER_TOKEN, TOKEN, StationApi
from tests.support.station_api import request_body as request_body  # re-exported: the tests import it from here

V2 = "dev.agentpod.permission.v2"
BOT_PASSWORD = "test-bot-password-91c2"


class Station(StationApi):
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

    async def prompt(self, sid: str, seq: int, human: Human | None = None) -> dict[str, Any]:
        """The prompt of ``sid``'s request ``seq`` as ``human`` (alice) reads it; fails when none comes."""
        prompt = await self.prompt_for(sid, seq=seq, human=human)
        assert prompt, f"no prompt for {sid}:{seq}"
        return prompt

    async def submit(
        self, body: dict[str, Any], *, human: Human | None = None, token: str | None = TOKEN
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """POST a new request (201) and wait for its prompt (``prompt``): (record, prompt event)."""
        rec = await self.post(body, token=token)
        return rec, await self.prompt(body["sessionId"], rec["request_seq"], human)

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
