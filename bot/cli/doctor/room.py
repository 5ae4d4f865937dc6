"""doctor's check of the station room: joined or invited, the bot's power, encryption."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from bot.cli.doctor.homeserver import C, Login, call, why
from bot.cli.doctor.report import Report
from bot.config import Config
from bot.events.checkpoints import CHECKPOINT_TYPE
from bot.matrix.room import INFINITE, RoomState
from bot.util.jsonhttp import quote


@dataclass
class Room:
    """The station room as the bot sees it once joined."""

    room_id: str
    state: RoomState
    membership: dict[str, str]


def level(n: int) -> str:
    return "unlimited (room creator)" if n >= INFINITE else str(n)


def _resolve(cfg: Config, token: str, rep: Report) -> str | None:
    room = cfg.matrix.room
    if not room.startswith("#"):
        return room
    status, body = call(cfg, "GET", C + f"/directory/room/{quote(room)}", token=token)
    rid = body.get("room_id") if isinstance(body, dict) else None
    if status != 200 or not isinstance(rid, str):
        rep.fail(f"room: the alias {room} does not resolve ({why(status, body)})", "fix matrix.room")
        return None
    rep.ok(f"room: {room} resolves to {rid}")
    return rid


def _invite_state(cfg: Config, token: str, room_id: str) -> list[dict[str, Any]] | None:
    """The stripped state of a pending invite to ``room_id``, or None when there is no invite."""
    flt = {"room": {"rooms": [room_id], "timeline": {"limit": 0}, "ephemeral": {"types": []}},
           "presence": {"types": []}, "account_data": {"types": []}}
    path = C + "/sync?timeout=0&filter=" + quote(json.dumps(flt, separators=(",", ":")))
    status, body = call(cfg, "GET", path, token=token)
    if status != 200 or not isinstance(body, dict):
        return None
    invite = body.get("rooms", {}).get("invite", {}).get(room_id)
    if not isinstance(invite, dict):
        return None
    events = invite.get("invite_state", {}).get("events", [])
    return [e for e in events if isinstance(e, dict)] if isinstance(events, list) else []


def _encryption_verdict(cfg: Config, encrypted: bool, rep: Report) -> None:
    if not encrypted:
        rep.ok("room encryption: off (prompts and answers travel as plain events)")
    elif cfg.matrix.encryption:
        rep.ok(f"room encryption: on (the bot encrypts and decrypts; trust {cfg.matrix.trust})")
    else:
        rep.fail("room encryption: on, but [matrix] encryption = false: the bot would post nothing there",
                 "set [matrix] encryption = true (the default), or use an unencrypted station room")


def _check_power(cfg: Config, rs: RoomState, rep: Report) -> None:
    bot = cfg.matrix.user_id
    have = rs.power_of(bot)
    needs = {t: rs.power_needed(t) for t in ("m.room.message", "m.reaction", "m.room.redaction")}
    if not cfg.prompts.seed_reactions:
        needs.pop("m.reaction")
    short = {t: n for t, n in needs.items() if have < n}
    what = ", ".join(f"{t} {n}" for t, n in needs.items())
    if short:
        rep.fail(f"room power: the bot has {level(have)}, below what it sends ({what})",
                 f"raise {bot}'s power level in the room to {max(short.values())}")
    else:
        rep.ok(f"room power: the bot has {level(have)}; it needs {what}")
    state = rs.state_power_needed(CHECKPOINT_TYPE)
    if have < state:
        rep.warn(
            f"room power: the bot has {level(have)}, below the {state} a ledger checkpoint ({CHECKPOINT_TYPE} state "
            "event) needs: it posts them as m.notice messages instead (unreadable to audit verify when encrypted)",
            f"raise {bot}'s power level to {state}, or set events.{CHECKPOINT_TYPE} to {level(have)} in the "
            "room's power levels",
        )


def check_room(cfg: Config, login: Login, rep: Report) -> Room | None:
    """Membership, power levels and encryption; the room id and its state when the bot is joined."""
    bot = cfg.matrix.user_id
    room_id = _resolve(cfg, login.token, rep)
    if room_id is None:
        return None
    status, body = call(cfg, "GET", C + "/joined_rooms", token=login.token)
    joined = isinstance(body, dict) and room_id in body.get("joined_rooms", [])
    if not joined:
        stripped = _invite_state(cfg, login.token, room_id)
        if stripped is None:
            rep.fail(f"room: {bot} is neither joined to nor invited into {room_id}",
                     f"invite {bot} into the station room (the daemon accepts it on start), or fix matrix.room")
            return None
        rep.ok(f"room: {bot} is invited into {room_id} (the daemon accepts the invite on start)")
        _encryption_verdict(cfg, any(e.get("type") == "m.room.encryption" for e in stripped), rep)
        rep.ok("room power levels: checked once the bot has joined (run doctor again after the daemon started)")
        return None
    status, state = call(cfg, "GET", C + f"/rooms/{quote(room_id)}/state", token=login.token)
    if status != 200 or not isinstance(state, list):
        rep.fail(f"room: cannot read the state of {room_id} ({why(status, state)})", "check the bot's membership")
        return None
    rs = RoomState()
    membership: dict[str, str] = {}
    for ev in state:
        rs.apply(ev)
        if isinstance(ev, dict) and ev.get("type") == "m.room.member" and isinstance(ev.get("content"), dict):
            membership[str(ev.get("state_key"))] = str(ev["content"].get("membership"))
    rep.ok(f"room: {bot} is joined to {room_id} ({len(rs.members)} member(s))")
    _check_power(cfg, rs, rep)
    _encryption_verdict(cfg, rs.encrypted, rep)
    return Room(room_id, rs, membership)
