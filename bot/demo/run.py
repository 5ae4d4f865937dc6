"""The whole thing on one machine: Synapse, a bot, a human, the daemon, an ACP client and a scripted agent.

``python -m bot.demo [--auto] [--state-dir DIR]``. Everything it starts is stopped on exit, on
Ctrl-C and on SIGTERM. State (Synapse's database and keys, the accounts, the room, the daemon's
inbox) lives in the state dir and is reused by the next run; delete the folder to start over.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import io
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from bot.demo.homeserver import SECRET, Homeserver, free_port, http

if TYPE_CHECKING:
    from bot.demo.client import DemoClient

BOT = "permbot"
BOT_PASSWORD = "demo-bot-password"
HUMAN = "alice"
HUMAN_PASSWORD = "demo-alice-password"
ROOM_NAME = "permission-bot demo"
LABEL = "demo-agent"
PROMPT_TEXT = "Clean the build directory, please."


class DemoError(Exception):
    """Something the demo cannot get past; the message says what to look at."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The demo's flags."""
    p.add_argument(
        "--auto",
        action="store_true",
        help="answer the prompt from a scripted human (replies 1) and exit when the agent has its outcome",
    )
    p.add_argument(
        "--state-dir",
        default="demo-state",
        metavar="DIR",
        help="where Synapse, the accounts and the daemon keep their state (default: ./demo-state)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=90.0,
        metavar="SECONDS",
        help="with --auto: give up when the agent has no outcome after this long (default: 90)",
    )


_OUT = {"closed": False}


def _say(line: str = "") -> None:
    """One line to stdout; a closed pipe (``| head``) silences the rest instead of failing the run."""
    if _OUT["closed"]:
        return
    try:
        print(line, flush=True)
    except BrokenPipeError:
        _OUT["closed"] = True
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Synapse and the daemon bind it
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _show(path: Path) -> str:
    """``path`` relative to the working directory when it is below it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _console_script() -> list[str]:
    """How to call ``permission-bot``: the console script beside this interpreter, else ``python -m bot``."""
    exe = Path(sys.executable).parent / "permission-bot"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "bot"]


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class Demo:
    """One demo run: what it started, so that everything can be stopped."""

    def __init__(self, state_dir: Path, auto: bool, timeout: float) -> None:
        self.dir = state_dir.resolve()
        self.auto = auto
        self.timeout = timeout
        self.hs: Homeserver | None = None
        self.daemon: subprocess.Popen[bytes] | None = None
        self.files: list[IO[bytes]] = []
        self.lock: IO[bytes] | None = None
        self.saved: dict[str, Any] = {}
        self.interrupted = False
        self.api_url = ""
        self.agent_started = False

    # -- saved state ----------------------------------------------------------------------------------
    @property
    def _saved_path(self) -> Path:
        return self.dir / "demo.json"

    def _load(self) -> None:
        try:
            data = json.loads(self._saved_path.read_text())
        except (OSError, ValueError):
            data = {}
        self.saved = data if isinstance(data, dict) else {}

    def _save(self) -> None:
        tmp = self._saved_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.saved, indent=2))
        os.chmod(tmp, 0o600)
        tmp.replace(self._saved_path)

    def _lock(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        f = open(self.dir / "demo.lock", "wb")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            raise DemoError(f"another demo is running with {_show(self.dir)}; stop it or pass --state-dir") from None
        self.lock = f

    # -- Synapse --------------------------------------------------------------------------------------
    def _start_synapse(self) -> Homeserver:
        hs = Homeserver(self.dir / "synapse")
        cfg = hs.dir / "homeserver.yaml"
        if cfg.exists() and SECRET not in cfg.read_text():
            cfg.unlink()  # an earlier first run was stopped halfway through generating it
        if not cfg.exists():
            _say("[1/5] Synapse: generating its config and signing key (first run only, a few seconds)")
            step = "     "
        else:
            step = "[1/5] Synapse:"
        hs._generate()
        text = cfg.read_text()
        m = re.search(r"(?m)^(\s+port: )(\d+)$", text)
        if m and _bindable(int(m.group(2))):
            hs.port = int(m.group(2))  # keep the address of earlier runs, so a logged-in client still works
        hs.url = f"http://127.0.0.1:{hs.port}"
        text = re.sub(r"(?m)^(\s+port: )\d+$", rf"\g<1>{hs.port}", text)
        text = re.sub(r"(?m)^\s+- ::1\n", "", text)  # loopback IPv4 only
        cfg.write_text(text)
        _say(f"{step} starting at {hs.url} (log {_show(hs.dir / 'homeserver.log')})")
        self.hs = hs
        hs.start()
        return hs

    # -- accounts and the room ------------------------------------------------------------------------
    def _login(self, hs: Homeserver, localpart: str, password: str) -> dict[str, Any]:
        body = {
            "type": "m.login.password",
            "identifier": {"type": "m.id.user", "user": localpart},
            "password": password,
            "initial_device_display_name": "permission-bot demo",
        }
        return dict(http("POST", hs.url + "/_matrix/client/v3/login", body))

    def _register_or_login(self, hs: Homeserver, localpart: str, password: str) -> dict[str, Any]:
        try:
            return hs.register(localpart, password)
        except urllib.error.HTTPError as e:
            if e.code != 400:
                raise
            return self._login(hs, localpart, password)

    def _accounts(self, hs: Homeserver) -> tuple[str, dict[str, Any]]:
        bot_id = f"@{BOT}:{hs.server_name}"
        if not self.saved.get("bot_registered"):
            r = self._register_or_login(hs, BOT, BOT_PASSWORD)
            with contextlib.suppress(urllib.error.URLError):  # the daemon logs in on its own
                http("POST", hs.url + "/_matrix/client/v3/logout", {}, r["access_token"])
            self.saved["bot_registered"] = True
            self._save()
        human = self.saved.get("human")
        if isinstance(human, dict):
            try:
                who = http("GET", hs.url + "/_matrix/client/v3/account/whoami", token=human.get("access_token"))
                if who.get("user_id") != human.get("user_id"):
                    human = None
            except urllib.error.HTTPError:
                human = None
        if not isinstance(human, dict):
            r = self._register_or_login(hs, HUMAN, HUMAN_PASSWORD)
            human = {k: r[k] for k in ("user_id", "access_token", "device_id")}
            self.saved["human"] = human
            self._save()
        _say(f"[2/5] Accounts: the bot {bot_id} (password {BOT_PASSWORD}),")
        _say(f"      you {human['user_id']} (password {HUMAN_PASSWORD})")
        return bot_id, human

    def _room(self, hs: Homeserver, bot_id: str, human: dict[str, Any]) -> str:
        room_id = self.saved.get("room_id")
        if isinstance(room_id, str):
            joined = http("GET", hs.url + "/_matrix/client/v3/joined_rooms", token=human["access_token"])
            if room_id in joined.get("joined_rooms", []):
                _say(f'[3/5] Station room: {room_id} ("{ROOM_NAME}", from an earlier run)')
                return room_id
        room_id = hs.create_room(human["access_token"], invite=[bot_id], name=ROOM_NAME)
        self.saved["room_id"] = room_id
        self._save()
        _say(f'[3/5] Station room: {room_id} ("{ROOM_NAME}"), created by {human["user_id"]}, the bot invited')
        return room_id

    # -- the daemon -----------------------------------------------------------------------------------
    def _write_config(self, hs: Homeserver, bot_id: str, human_id: str, room_id: str) -> Path:
        port = self.saved.get("api_port")
        if not isinstance(port, int) or not _bindable(port):
            port = free_port()
        token = self.saved.get("api_token")
        if not isinstance(token, str):
            token = "demo-" + secrets.token_hex(12)
        self.saved.update(api_port=port, api_token=token)
        self._save()
        self.api_url = f"http://127.0.0.1:{port}"
        from nio.crypto import ENCRYPTION_ENABLED

        # the demo room is unencrypted: without matrix-nio's e2e extra, run with encryption off
        encryption = "" if ENCRYPTION_ENABLED else "encryption = false  # matrix-nio[e2e] is not installed\n"
        path = self.dir / "config.toml"
        path.write_text(
            f"""# Written by the demo (python -m bot.demo) on every run.
[matrix]
homeserver = "{hs.url}"
user_id = "{bot_id}"
password = "{BOT_PASSWORD}"
device_name = "permission-bot demo"
room = "{room_id}"
{encryption}
[answerers]
users = ["{human_id}"]

[api]
listen = "127.0.0.1:{port}"
token = "{token}"

[state]
path = "{self.dir / "bot"}"

[prompts]
timeout = "15m"
on_timeout = "reject"

[log]
level = "info"
format = "console"
"""
        )
        os.chmod(path, 0o600)
        return path

    def _api(self, method: str, path: str, body: Any = None, timeout: float = 10) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.api_url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        req.add_header("Authorization", f"Bearer {self.saved['api_token']}")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, None

    def _start_daemon(self, config: Path) -> None:
        log_path = self.dir / "daemon.log"
        out = open(log_path, "ab")
        self.files.append(out)
        cmd = [sys.executable, "-m", "bot", "run", "--config", str(config)]
        # its own session: Ctrl-C reaches the demo, which stops the daemon after the agent
        self.daemon = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        _say(f"[4/5] Daemon: permission-bot run --config {_show(config)}")
        _say(f"      API {self.api_url}, log {_show(log_path)}")

    async def _wait_daemon(self, timeout: float = 60) -> None:
        log_path = self.dir / "daemon.log"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.daemon is not None and self.daemon.poll() is not None:
                raise DemoError(f"the daemon exited ({self.daemon.returncode}):\n{_tail(log_path)}")
            try:
                status, body = await asyncio.to_thread(self._api, "GET", "/healthz", None, 2)
                if status == 200 and isinstance(body, dict) and body.get("matrix_ready"):
                    return
            except (OSError, ValueError):
                pass
            await asyncio.sleep(0.2)
        raise DemoError(f"the daemon did not become ready in {timeout:.0f}s:\n{_tail(log_path)}")

    async def _cancel_stale(self) -> None:
        """Cancel requests an earlier, interrupted run left pending, so a plain "1" is unambiguous."""
        status, pending = await asyncio.to_thread(self._api, "GET", "/permissions")
        if status != 200 or not isinstance(pending, list):
            return
        for rec in pending:
            rid = urllib.parse.quote(str(rec.get("id", "")), safe="")
            await asyncio.to_thread(self._api, "POST", f"/permissions/{rid}", {"decision": "cancel"})
        if pending:
            _say(f"      cancelled {len(pending)} request(s) left pending by an earlier run")

    async def _wait_prompt(self, session_id: str, turn: asyncio.Task[str]) -> dict[str, Any]:
        """The session's first record once the bot has posted its prompt."""
        path = "/permissions?session=" + urllib.parse.quote(session_id)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if turn.done():
                raise DemoError(f"the agent's turn ended before any prompt was posted: {turn.result()}")
            status, recs = await asyncio.to_thread(self._api, "GET", path)
            if status == 200 and isinstance(recs, list):
                for rec in recs:
                    if isinstance(rec, dict) and rec.get("prompt_event_id"):
                        return rec
            await asyncio.sleep(0.2)
        raise DemoError(f"no prompt was posted within 60s; see {_show(self.dir / 'daemon.log')}")

    # -- the human ------------------------------------------------------------------------------------
    async def _answer_as_human(self, hs: Homeserver, human: dict[str, Any], room_id: str, event_id: str) -> None:
        """Reply "1" to the prompt from a matrix-nio client logged in as the human."""
        from nio import AsyncClient, RoomSendResponse

        client = AsyncClient(hs.url, human["user_id"], device_id=human["device_id"])
        client.access_token = human["access_token"]
        client.user_id = human["user_id"]
        try:
            content = {"msgtype": "m.text", "body": "1", "m.relates_to": {"m.in_reply_to": {"event_id": event_id}}}
            r = await client.room_send(room_id, "m.room.message", content)
            if not isinstance(r, RoomSendResponse):
                raise DemoError(f"the scripted human could not reply: {r}")
        finally:
            await client.close()
        _say(f'[auto] {human["user_id"]} replies "1" to the prompt')

    # -- the run --------------------------------------------------------------------------------------
    async def main(self) -> int:
        """Run the demo; the exit code."""
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def on_signal(sig: signal.Signals) -> None:
            if self.interrupted:
                _say("(still stopping)")
                return
            self.interrupted = True
            _say(f"\n{sig.name}: stopping everything the demo started...")
            task.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal, sig)
        try:
            return await self._run()
        except asyncio.CancelledError:
            if self.interrupted:
                return 130
            raise
        except DemoError as e:
            _say(f"demo failed: {e}")
            return 1
        except (OSError, RuntimeError) as e:  # Synapse would not start, a request failed
            _say(f"demo failed: {type(e).__name__}: {e} (logs under {_show(self.dir)})")
            return 1
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    async def _run(self) -> int:
        from bot.demo.client import DemoClient, open_session

        _say("permission-bot demo")
        _say(f"      state in {_show(self.dir)} (reused by the next run; delete it to start over)")
        _say()
        self._lock()
        self._load()
        hs = await asyncio.to_thread(self._start_synapse)
        bot_id, human = await asyncio.to_thread(self._accounts, hs)
        room_id = await asyncio.to_thread(self._room, hs, bot_id, human)
        config = self._write_config(hs, bot_id, human["user_id"], room_id)
        self._start_daemon(config)
        await self._wait_daemon()
        await self._cancel_stale()

        acp_log = open(self.dir / "acp.log", "ab")
        self.files.append(acp_log)
        agent_cmd = [sys.executable, "-m", "bot.demo.agent"]
        command = [*_console_script(), "acp", "--url", self.api_url, "--label", LABEL, "--", *agent_cmd]
        env = {"PERMISSION_BOT_TOKEN": str(self.saved["api_token"])}
        env.update({k: os.environ[k] for k in ("PYTHONPATH", "VIRTUAL_ENV") if k in os.environ})
        client = DemoClient(_say)
        async with open_session(client, command, env, os.getcwd(), acp_log.fileno()) as session:
            self.agent_started = True
            _say("[5/5] Agent: permission-bot acp -- python -m bot.demo.agent")
            _say(f"      ACP session {session.session_id}, proxy log {_show(self.dir / 'acp.log')}")
            _say()
            turn = asyncio.create_task(session.prompt(PROMPT_TEXT), name="turn")
            try:
                return await self._converse(hs, human, room_id, session.session_id, turn, client)
            finally:
                if not turn.done():
                    turn.cancel()
                    await asyncio.gather(turn, return_exceptions=True)

    async def _converse(
        self,
        hs: Homeserver,
        human: dict[str, Any],
        room_id: str,
        session_id: str,
        turn: asyncio.Task[str],
        client: DemoClient,
    ) -> int:
        rec = await self._wait_prompt(session_id, turn)
        event_id = str(rec["prompt_event_id"])
        path = f"/_matrix/client/v3/rooms/{urllib.parse.quote(room_id)}/event/{urllib.parse.quote(event_id)}"
        event = await asyncio.to_thread(http, "GET", hs.url + path, None, human["access_token"])
        body = str(event.get("content", {}).get("body", ""))
        _say()
        _say(f"The bot posted this prompt to the station room ({event_id}):")
        _say()
        for line in body.splitlines():
            _say(f"    {line}".rstrip())
        _say()
        self._how_to_answer(hs, human, str(rec["id"]))
        if self.auto:
            await self._answer_as_human(hs, human, room_id, event_id)
            try:
                stop_reason = await asyncio.wait_for(asyncio.shield(turn), self.timeout)
            except TimeoutError:
                raise DemoError(
                    f"no outcome within {self.timeout:.0f}s; see {_show(self.dir / 'daemon.log')}"
                ) from None
        else:
            stop_reason = await turn
        status, final = await asyncio.to_thread(self._api, "GET", "/permissions/" + urllib.parse.quote(rec["id"]))
        who = ""
        if status == 200 and isinstance(final, dict) and isinstance(final.get("outcome"), dict):
            o = final["outcome"]
            name = f" ({o['option_name']})" if o.get("option_name") else ""
            who = f"{name}, answered by {o.get('answered_by')} via {o.get('via')}"
        _say()
        _say(f"Outcome: the agent got {client.outcome or 'nothing'}{who}; its turn ended with {stop_reason}")
        return 0 if client.outcome else 1

    def _how_to_answer(self, hs: Homeserver, human: dict[str, Any], request_id: str) -> None:
        cli = shlex.join([*_show_cli(), "permissions", "approve", request_id])
        _say("How to answer (either way):")
        _say(f"  - In any Matrix client (Element: https://app.element.io, 'Edit' the homeserver): {hs.url}")
        _say(f'    log in as {HUMAN} / {HUMAN_PASSWORD} ({human["user_id"]}), open the room "{ROOM_NAME}"')
        _say("    and reply with a number (1 = Allow once, 3 = Reject), or react with 1️⃣.")
        _say("  - From a shell:")
        _say(f"    PERMISSION_BOT_URL={self.api_url} PERMISSION_BOT_TOKEN={self.saved['api_token']} \\")
        _say(f"      {cli}")
        _say()
        if self.auto:
            _say("--auto: a scripted human answers now.")
        else:
            _say("Waiting for an answer (Ctrl-C stops everything the demo started)...")

    # -- stopping -------------------------------------------------------------------------------------
    def stop_all(self) -> None:
        """Stop the daemon, then Synapse; close files, drop the lock. Safe to call more than once."""
        stopped = ["the agent"] if self.agent_started else []
        if self.daemon is not None and self.daemon.poll() is None:
            self.daemon.terminate()
            try:
                self.daemon.wait(15)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()
            stopped.append("the daemon")
        self.daemon = None
        if self.hs is not None:
            if self.hs.proc is not None:
                stopped.append("Synapse")
            self.hs.stop()
            self.hs = None
        for f in self.files:
            f.close()
        self.files.clear()
        if self.lock is not None:
            self.lock.close()
            self.lock = None
        if stopped:
            _say(f"Stopped: {', '.join(stopped)}.")


def _show_cli() -> list[str]:
    """``permission-bot`` as the reader can type it."""
    exe = Path(sys.executable).parent / "permission-bot"
    if not exe.exists():
        return [_show(Path(sys.executable)), "-m", "bot"]
    on_path = shutil.which("permission-bot")
    return ["permission-bot"] if on_path and Path(on_path).resolve() == exe.resolve() else [_show(exe)]


def run(args: argparse.Namespace) -> int:
    """Run the demo from parsed ``args`` (see :func:`add_arguments`); the exit code."""
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(errors="replace")
    demo = Demo(Path(args.state_dir), bool(args.auto), float(args.timeout))
    code = 1
    try:
        code = asyncio.run(demo.main())
    except KeyboardInterrupt:
        code = 130
    finally:
        demo.stop_all()
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bot.demo``."""
    p = argparse.ArgumentParser(prog="python -m bot.demo", description="Run permission-bot end to end on this machine.")
    add_arguments(p)
    return run(p.parse_args(argv))
