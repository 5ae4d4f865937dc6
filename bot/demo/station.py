"""The demo's Matrix side: its Synapse, the bot's and the human's accounts, and the station room."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from bot.demo import synapse_config
from bot.demo.homeserver import Homeserver, http
from bot.demo.saved import Saved
from bot.demo.say import bindable, say, show
from bot.util.jsonhttp import HTTPStatusError, Unreachable

BOT = "permbot"
BOT_PASSWORD = "demo-bot-password"
HUMAN = "alice"
HUMAN_PASSWORD = "demo-alice-password"
ROOM_NAME = "permission-bot demo"
C = "/_matrix/client/v3"


def prepare_synapse(state_dir: Path) -> Homeserver:
    """The demo's Synapse, not started yet (``start()`` generates its config on the first run)."""
    hs = Homeserver(state_dir / "synapse")
    cfg = hs.dir / "homeserver.yaml"
    if cfg.exists() and not synapse_config.complete(cfg):
        cfg.unlink()  # an earlier first run was stopped halfway through generating it
    if not cfg.exists():
        say("[1/5] Synapse: generating its config and signing key (first run only, a few seconds)")
        step = "     "
    else:
        step = "[1/5] Synapse:"
        earlier = synapse_config.port(cfg)
        if earlier is not None and bindable(earlier):
            hs.port = earlier  # keep the address of earlier runs, so a logged-in client still works
            hs.url = f"http://127.0.0.1:{hs.port}"
    say(f"{step} starting at {hs.url} (log {show(hs.dir / 'homeserver.log')})")
    return hs


def _register_or_login(hs: Homeserver, localpart: str, password: str) -> dict[str, Any]:
    try:
        return hs.register(localpart, password)
    except HTTPStatusError as e:
        if e.status != 400:  # 400: the name is taken (an earlier run's account)
            raise
    body = {"type": "m.login.password", "identifier": {"type": "m.id.user", "user": localpart}, "password": password,
            "initial_device_display_name": "permission-bot demo"}
    return dict(http("POST", hs.url + C + "/login", body))


def accounts(hs: Homeserver, saved: Saved) -> tuple[str, dict[str, Any]]:
    """The bot's user id (registered, its login left to the daemon) and the human's session."""
    bot_id = f"@{BOT}:{hs.server_name}"
    if not saved.get("bot_registered"):
        r = _register_or_login(hs, BOT, BOT_PASSWORD)
        with contextlib.suppress(Unreachable, HTTPStatusError):  # the daemon logs in on its own
            http("POST", hs.url + C + "/logout", {}, r["access_token"])
        saved["bot_registered"] = True
        saved.save()
    human = saved.get("human")
    if isinstance(human, dict):
        try:
            who = http("GET", hs.url + C + "/account/whoami", token=human.get("access_token"))
            if who.get("user_id") != human.get("user_id"):
                human = None
        except HTTPStatusError:
            human = None
    if not isinstance(human, dict):
        r = _register_or_login(hs, HUMAN, HUMAN_PASSWORD)
        human = {k: r[k] for k in ("user_id", "access_token", "device_id")}
        saved["human"] = human
        saved.save()
    say(f"[2/5] Accounts: the bot {bot_id} (password {BOT_PASSWORD}),")
    say(f"      you {human['user_id']} (password {HUMAN_PASSWORD})")
    return bot_id, human


def station_room(hs: Homeserver, saved: Saved, bot_id: str, human: dict[str, Any]) -> str:
    """The room of an earlier run the human is still in, else a new one with the bot invited."""
    room_id = saved.get("room_id")
    if isinstance(room_id, str):
        joined = http("GET", hs.url + C + "/joined_rooms", token=human["access_token"])
        if room_id in joined.get("joined_rooms", []):
            say(f'[3/5] Station room: {room_id} ("{ROOM_NAME}", from an earlier run)')
            return room_id
    room_id = hs.create_room(human["access_token"], invite=[bot_id], name=ROOM_NAME)
    saved["room_id"] = room_id
    saved.save()
    say(f'[3/5] Station room: {room_id} ("{ROOM_NAME}"), created by {human["user_id"]}, the bot invited')
    return room_id
