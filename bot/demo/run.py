"""The whole thing on one machine: Synapse, a bot, a human, the daemon, an ACP client and a scripted agent.

``python -m bot.demo [--auto] [--state-dir DIR]``. Everything it starts is stopped on exit, on
Ctrl-C and on SIGTERM. State (Synapse's database and keys, the accounts, the room, the daemon's
inbox) lives in the state dir and is reused by the next run; delete the folder to start over.
Parts: station.py (Synapse, accounts, room), daemon.py (config, process, API), saved.py, say.py.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import shlex
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from bot.demo import add_arguments
from bot.demo.daemon import DemoDaemon, write_config
from bot.demo.homeserver import Homeserver, http
from bot.demo.saved import DemoError, Saved, lock
from bot.demo.say import console_script, say, show, show_cli
from bot.demo.station import BOT_PASSWORD, HUMAN, HUMAN_PASSWORD, ROOM_NAME, accounts, prepare_synapse, station_room
from bot.util import jsonhttp
from bot.util.aio import on_signals

if TYPE_CHECKING:
    from bot.demo.client import DemoClient

LABEL = "demo-agent"
PROMPT_TEXT = "Clean the build directory, please."


class Demo:
    """One demo run: what it started, so that everything can be stopped."""

    def __init__(self, state_dir: Path, auto: bool, timeout: float) -> None:
        self.dir = state_dir.resolve()
        self.auto = auto
        self.timeout = timeout
        self.hs: Homeserver | None = None
        self.daemon: DemoDaemon | None = None
        self.files: list[IO[bytes]] = []
        self.lock: IO[bytes] | None = None
        self.saved = Saved(self.dir)
        self.interrupted = False
        self.agent_started = False

    # -- the human ------------------------------------------------------------------------------------
    async def _answer_as_human(self, hs: Homeserver, human: dict[str, Any], room_id: str, event_id: str) -> None:
        """Reply "1" to the prompt as the human (the demo's room is unencrypted: one client-server send)."""
        content = {"msgtype": "m.text", "body": "1", "m.relates_to": {"m.in_reply_to": {"event_id": event_id}}}
        path = f"/_matrix/client/v3/rooms/{jsonhttp.quote(room_id)}/send/m.room.message/{os.urandom(8).hex()}"
        try:
            await asyncio.to_thread(http, "PUT", hs.url + path, content, human["access_token"])
        except jsonhttp.HTTPStatusError as e:
            raise DemoError(f"the scripted human could not reply: {e}") from None
        say(f'[auto] {human["user_id"]} replies "1" to the prompt')

    # -- the run --------------------------------------------------------------------------------------
    async def main(self) -> int:
        """Run the demo; the exit code."""
        task = asyncio.current_task()
        assert task is not None

        def on_signal(sig: signal.Signals) -> None:
            if self.interrupted:
                say("(still stopping)")
                return
            self.interrupted = True
            say(f"\n{sig.name}: stopping everything the demo started...")
            task.cancel()

        remove_handlers = on_signals(on_signal, (signal.SIGINT, signal.SIGTERM))
        try:
            return await self._run()
        except asyncio.CancelledError:
            if self.interrupted:
                return 130
            raise
        except DemoError as e:
            say(f"demo failed: {e}")
            return 1
        except (OSError, RuntimeError, jsonhttp.Unreachable, jsonhttp.HTTPStatusError) as e:
            # Synapse would not start, a request failed
            say(f"demo failed: {type(e).__name__}: {e} (logs under {show(self.dir)})")
            return 1
        finally:
            remove_handlers()

    async def _run(self) -> int:
        from bot.demo.client import DemoClient, open_session, prompt_turn

        say("permission-bot demo")
        say(f"      state in {show(self.dir)} (reused by the next run; delete it to start over)")
        say()
        self.lock = lock(self.dir)
        self.saved.load()
        self.hs = hs = prepare_synapse(self.dir)
        await asyncio.to_thread(hs.start)
        bot_id, human = await asyncio.to_thread(accounts, hs, self.saved)
        room_id = await asyncio.to_thread(station_room, hs, self.saved, bot_id, human)
        config, api_url = write_config(self.dir, self.saved, hs.url, bot_id, human["user_id"], room_id, BOT_PASSWORD)
        self.daemon = daemon = DemoDaemon(self.dir, api_url, str(self.saved["decider_token"]))
        daemon.start(config, self.files)
        await daemon.wait_ready()
        await daemon.cancel_stale()

        acp_log = open(self.dir / "acp.log", "ab")
        self.files.append(acp_log)
        agent_cmd = [sys.executable, "-m", "bot.demo.agent"]
        command = [*console_script(), "acp", "--url", api_url, "--label", LABEL, "--", *agent_cmd]
        env = {"PERMISSION_BOT_TOKEN": str(self.saved["agent_token"])}  # the proxy submits: the agent role
        env.update({k: os.environ[k] for k in ("PYTHONPATH", "VIRTUAL_ENV") if k in os.environ})
        client = DemoClient(say)
        async with open_session(client, command, env, os.getcwd(), acp_log.fileno()) as (conn, session_id):
            self.agent_started = True
            say("[5/5] Agent: permission-bot acp -- python -m bot.demo.agent")
            say(f"      ACP session {session_id}, proxy log {show(self.dir / 'acp.log')}")
            say()
            turn = asyncio.create_task(prompt_turn(conn, session_id, PROMPT_TEXT), name="turn")
            try:
                return await self._converse(hs, human, room_id, session_id, turn, client)
            finally:
                if not turn.done():
                    turn.cancel()
                    await asyncio.gather(turn, return_exceptions=True)

    async def _converse(self, hs: Homeserver, human: dict[str, Any], room_id: str, session_id: str,
                        turn: asyncio.Task[str], client: DemoClient) -> int:
        assert self.daemon is not None
        rec = await self.daemon.wait_prompt(session_id, turn)
        event_id = str(rec["prompt_event_id"])
        path = f"/_matrix/client/v3/rooms/{jsonhttp.quote(room_id)}/event/{jsonhttp.quote(event_id)}"
        event = await asyncio.to_thread(http, "GET", hs.url + path, None, human["access_token"])
        body = str(event.get("content", {}).get("body", ""))
        say()
        say(f"The bot posted this prompt to the station room ({event_id}):")
        say()
        for line in body.splitlines():
            say(f"    {line}".rstrip())
        say()
        self._how_to_answer(hs, human, str(rec["id"]))
        if self.auto:
            await self._answer_as_human(hs, human, room_id, event_id)
            try:
                stop_reason = await asyncio.wait_for(asyncio.shield(turn), self.timeout)
            except TimeoutError:
                raise DemoError(f"no outcome within {self.timeout:.0f}s; see {show(self.dir / 'daemon.log')}") from None
        else:
            stop_reason = await turn
        status, final = await asyncio.to_thread(self.daemon.api, "GET", "/permissions/" + jsonhttp.quote(rec["id"]))
        who = ""
        if status == 200 and isinstance(final, dict) and isinstance(final.get("outcome"), dict):
            o = final["outcome"]
            name = f" ({o['option_name']})" if o.get("option_name") else ""
            who = f"{name}, answered by {o.get('answered_by')} via {o.get('via')}"
        say()
        say(f"Outcome: the agent got {client.outcome or 'nothing'}{who}; its turn ended with {stop_reason}")
        return 0 if client.outcome else 1

    def _how_to_answer(self, hs: Homeserver, human: dict[str, Any], request_id: str) -> None:
        assert self.daemon is not None
        cli = shlex.join([*show_cli(), "permissions", "approve", request_id])
        say("How to answer (either way):")
        say(f"  - In any Matrix client (Element: https://app.element.io, 'Edit' the homeserver): {hs.url}")
        say(f'    log in as {HUMAN} / {HUMAN_PASSWORD} ({human["user_id"]}), open the room "{ROOM_NAME}"')
        say("    and reply with a number (1 = Allow once, 3 = Reject), or react with 1️⃣.")
        say("  - From a shell:")
        say(f"    PERMISSION_BOT_URL={self.daemon.api_url} PERMISSION_BOT_TOKEN={self.saved['decider_token']} \\")
        say(f"      {cli}")
        say()
        if self.auto:
            say("--auto: a scripted human answers now.")
        else:
            say("Waiting for an answer (Ctrl-C stops everything the demo started)...")

    # -- stopping -------------------------------------------------------------------------------------
    def stop_all(self) -> None:
        """Stop the daemon, then Synapse; close files, drop the lock. Safe to call more than once."""
        stopped = ["the agent"] if self.agent_started else []
        if self.daemon is not None and self.daemon.stop():
            stopped.append("the daemon")
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
            say(f"Stopped: {', '.join(stopped)}.")


def run(args: argparse.Namespace) -> int:
    """Run the demo from parsed ``args`` (see :func:`add_arguments`); the exit code."""
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(errors="replace")
    demo = Demo(Path(args.state_dir), bool(args.auto), float(args.timeout))
    try:
        return asyncio.run(demo.main())
    except KeyboardInterrupt:
        return 130
    finally:
        demo.stop_all()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bot.demo``."""
    p = argparse.ArgumentParser(prog="python -m bot.demo", description="Run permission-bot end to end on this machine.")
    add_arguments(p)
    return run(p.parse_args(argv))
