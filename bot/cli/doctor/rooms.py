"""doctor's check of every ``[[rooms]]`` entry: the same room and answerer checks as for the default room,
each line marked with the room's name (``ok   [infra] room: ...``), its advice naming the entry's own keys
(``rooms.0.room``, ``rooms.0.answerers.users``), as the config's errors do."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.cli.doctor.answerers import check_answerers
from bot.cli.doctor.homeserver import Login
from bot.cli.doctor.report import Report
from bot.cli.doctor.room import check_room
from bot.config import Config


@dataclass
class Marked(Report):
    """A report whose lines carry a room's name and go to ``parent`` (a failure fails it too)."""

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
