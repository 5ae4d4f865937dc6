"""doctor's check of the answerers: they exist, have joined, and may reply (bot/matrix/room.may_answer)."""

from __future__ import annotations

from bot.cli.doctor.homeserver import C, Login, call, why
from bot.cli.doctor.report import Report
from bot.cli.doctor.room import Room, level
from bot.config import Config
from bot.matrix.room import may_answer
from bot.util.jsonhttp import Unreachable, quote


def _listed(cfg: Config, user: str, login: Login, room: Room | None, rep: Report) -> bool:
    """One listed answerer: looked up, then (once the bot has joined) membership and power. Can they answer?"""
    try:
        status, body = call(cfg, "GET", C + f"/profile/{quote(user)}", token=login.token)
    except Unreachable as e:
        rep.warn(f"answerers: cannot look up {user} ({e})")
        return False
    if status == 404:
        rep.fail(f"answerers: {user} does not exist ({why(status, body)})", "fix answerers.users")
        return False
    if status != 200:
        rep.warn(f"answerers: cannot look up {user} ({why(status, body)})")
        return False
    if room is None:
        rep.ok(f"answerers: {user} exists")
        return False
    rs = room.state
    power, reply_needs = rs.power_of(user), rs.power_needed("m.room.message")
    if room.membership.get(user) == "invite":
        rep.warn(f"answerers: {user} is invited but has not joined the room yet", f"ask {user} to accept the invite")
    elif user not in rs.members:
        rep.warn(f"answerers: {user} exists but is not in the room", f"invite {user} into the station room")
    elif power < reply_needs:
        rep.warn(f"answerers: {user} has power {level(power)}, below the {reply_needs} needed to reply",
                 f"raise {user}'s power level")
    else:
        rep.ok(f"answerers: {user} exists, has joined, power {level(power)}")
        return True
    return False


def check_answerers(cfg: Config, login: Login | None, room: Room | None, rep: Report) -> None:
    users = cfg.answerers.users
    min_pl = cfg.answerers.min_power_level
    if not users and min_pl is None:
        rep.fail("answerers: nobody may answer prompts",
                 "list people in answerers.users or set answerers.min_power_level")
        return
    can_answer = [u for u in users if _listed(cfg, u, login, room, rep)] if login is not None else []
    if min_pl is not None and room is not None:
        rs = room.state
        qualified = [u for u in sorted(rs.members)
                     if u != cfg.matrix.user_id and may_answer(u, users=[], min_power_level=min_pl, room=rs)]
        if qualified:
            can_answer += qualified
            rep.ok(f"answerers: min_power_level {min_pl}: {len(qualified)} member(s) qualify")
        else:
            rep.warn(f"answerers: min_power_level {min_pl}: no member of the room has that much power")
    if room is not None and not can_answer:
        rep.fail("answerers: nobody in the room can answer prompts right now",
                 "invite an answerer into the station room, or adjust answerers.users / min_power_level")
