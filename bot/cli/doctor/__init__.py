"""`permission-bot doctor --config PATH`: check a config against the homeserver, the room and this machine.

Checks, in order: the config, the state folder, encryption support (and the bot's device), the
homeserver, the login, the bot's cross-signing identity and pinned identities, the room (joined or
invited, power levels, encryption), the answerers, the homeserver's message limit on the bot's account, the
API listen address and the watched harnesses.
One line per check: ``ok   ...``, ``WARN ...`` or ``FAIL ... -> what to do``; exit 0 when nothing
failed, 1 otherwise. Uses the daemon's saved session when there is one (no new device); else logs in
with the password and logs that device out again. Secrets are never printed.

Modules: report (the printer), state (the inbox read-only), config (config, state folder, API
address), homeserver (reachable, login), e2ee, room, answerers, ratelimit (exempt or limited, as far as can
be told); harnesses in bot/harness/check.py. Each ``[[rooms]]`` room is checked here as the default one.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, field

from bot.cli.doctor.answerers import check_answerers
from bot.cli.doctor.config import check_config, check_listen, check_state, daemon_health
from bot.cli.doctor.e2ee import check_cross_signing, check_encryption_support
from bot.cli.doctor.homeserver import Login, check_homeserver, check_login, logout
from bot.cli.doctor.ratelimit import check_rate_limit
from bot.cli.doctor.report import Report
from bot.cli.doctor.room import Room, check_room
from bot.cli.doctor.state import Saved, read_saved
from bot.config import Config
from bot.util.jsonhttp import Unreachable

__all__ = ["Marked", "Report", "run"]


@dataclass
class Marked(Report):
    """A report whose lines carry a ``[[rooms]]`` room's name (``ok   [infra] room: ...``) and go to ``parent``
    (a failure fails it too); its advice names the entry's own keys (``rooms.0.room``), as the config's errors do."""

    parent: Report = field(default_factory=Report)
    name: str = ""
    index: int = 0

    def _emit(self, line: str) -> None:
        key = f"rooms.{self.index}"  # the advice names this entry's keys, not the default room's
        line = line.replace("matrix.room", f"{key}.room").replace("answerers.", f"{key}.answerers.")
        self.parent._emit(f"{line[:5]}[{self.name}] {line[5:]}")

    def fail(self, what: str, todo: str) -> None:
        super().fail(what, todo)
        self.parent.failed = True


def check_rooms(cfg: Config, login: Login | None, rep: Report) -> None:
    """Joined (or invited), the bot's power, encryption and the answerers of each ``[[rooms]]`` room."""
    for i, r in enumerate(cfg.rooms):
        one = cfg.model_copy(update={"matrix": cfg.matrix.model_copy(update={"room": r.room}),
                                     "answerers": r.answerers})
        marked = Marked(parent=rep, name=r.name, index=i)
        room = check_room(one, login, marked) if login is not None else None
        check_answerers(one, login, room, marked)


def run(config_path: str) -> int:
    """Check the config, the homeserver, the login, the room, the answerers and the API address."""
    rep = Report()
    cfg = check_config(config_path, rep)
    if cfg is None:
        return 1
    from bot.cli import log_setup

    log_setup.refine(cfg)  # the log (stderr; the checks are on stdout) in the config's style, its secrets masked
    saved = read_saved(cfg) if check_state(cfg, rep) else Saved()  # a folder it may not read: nothing saved
    check_encryption_support(cfg, saved, rep)
    login: Login | None = None
    room: Room | None = None
    health = functools.cache(lambda: daemon_health(cfg))  # whatever serves api.listen, asked once
    try:
        if check_homeserver(cfg, rep):
            login = check_login(cfg, saved, rep)
            if login is not None:
                check_cross_signing(cfg, saved, login, rep)
                room = check_room(cfg, login, rep)
            else:
                rep.warn("room: not checked (no working login)")
        check_answerers(cfg, login, room, rep)
        check_rooms(cfg, login, rep)  # every [[rooms]] entry the same way, its lines marked with its name
        check_rate_limit(cfg, login, rep, health)
    except Unreachable as e:
        rep.fail(f"homeserver: stopped answering ({e})", "check the homeserver and run doctor again")
    finally:
        if login is not None and login.temporary:
            logout(cfg, login)
    check_listen(cfg, rep, health=health)
    from bot.harness.check import check_harnesses

    check_harnesses(cfg, rep)
    sys.stdout.flush()
    return 1 if rep.failed else 0
