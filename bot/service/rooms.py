"""The station rooms at work: one :class:`RoomAnswers` per room, routing by credential, per-room health.

A request's room is chosen from what submitted it and nothing else: the agent token that submitted it
(``[[rooms]] tokens``), or the watched harness that holds it (``[[rooms]] harnesses``), else the default
room. Each room's events go to its own answer handling, which settles only that room's requests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from bot.config import DEFAULT_ROOM, Config
from bot.inbox.store import Inbox
from bot.matrix.client import Matrix
from bot.matrix.room import may_answer
from bot.room.answers import PARKED_ROOM, RoomAnswers


class Rooms:
    """Every station room's answer handling, and what /healthz, /metrics and the API need of the rooms."""

    def __init__(
        self, cfg: Config, inbox: Inbox, matrix: Matrix, now: Callable[[], float],
        wake_post: Callable[[], None], wake_edits: Callable[[], None],
    ) -> None:
        self.cfg = cfg
        self.matrix = matrix
        self.answers = {
            name: RoomAnswers(inbox, matrix, room.notices, cfg.answerers_of(name), now, wake_post, wake_edits,
                              room=name)
            for name, room in matrix.rooms.items()
        }

    async def reprocess(self, source: dict[str, Any]) -> None:
        """A parked event, read again in the room it came from (its stored copy names it; see
        :data:`bot.room.answers.PARKED_ROOM`)."""
        room = source.pop(PARKED_ROOM, DEFAULT_ROOM)
        handling = self.answers.get(room) if isinstance(room, str) else None
        if handling is not None:
            await handling.handle(source)

    def health(self) -> list[dict[str, Any]]:
        """Each room: joined, encrypted, the bot's power to post, whether any answerer is in it."""
        out = []
        for name, room in self.matrix.rooms.items():
            state = room.station.room
            who = self.cfg.answerers_of(name)
            present = any(
                may_answer(m, users=who.users, min_power_level=who.min_power_level, room=state)
                for m in state.members if m != self.matrix.user_id
            )
            out.append({
                "name": name, "room_id": room.room_id, "joined": room.joined, "encrypted": room.encrypted,
                "can_post": state.power_of(self.matrix.user_id) >= state.power_needed("m.room.message"),
                "answerers_present": present,
            })
        return out


ROOM_FIGURES = {
    "joined": "Whether the bot is in the station room.",
    "encrypted": "Whether the station room is encrypted.",
    "can_post": "Whether the bot's power level lets it post prompts there.",
    "answerers_present": "Whether anyone who may answer is a member of the station room.",
}


class RoomFigures(Collector):
    """``/metrics`` per room, read when scraped: ``permission_bot_room_joined{room}``, ``..._encrypted``,
    ``..._can_post``, ``..._answerers_present`` (1 or 0)."""

    def __init__(self, rooms: Rooms) -> None:
        self.rooms = rooms

    def collect(self) -> Iterable[Metric]:
        health = self.rooms.health()
        for key, doc in ROOM_FIGURES.items():
            family = GaugeMetricFamily(f"permission_bot_room_{key}", doc, labels=["room"])
            for r in health:
                family.add_metric([r["name"]], 1.0 if r[key] else 0.0)
            yield family
