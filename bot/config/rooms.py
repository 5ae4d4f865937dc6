"""[[rooms]]: more station rooms, each with its own answerers, agent tokens and watched harnesses.

``[matrix] room`` and ``[answerers]`` stay the room named ``default``. A request goes to the room
that lists its agent token (or its harness), else to the default room: routing is by credential
only, never by anything a request says. :func:`check_rooms` checks the references across tables.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field, field_validator

from bot.config.base import Name, Section
from bot.config.escalation import EscalationConfig
from bot.config.matrix import AnswerersConfig, RoomRef

DEFAULT_ROOM = "default"


class RoomConfig(Section):
    """One ``[[rooms]]`` entry."""

    name: Name
    room: RoomRef
    answerers: AnswerersConfig = AnswerersConfig()
    tokens: list[str] = Field(default_factory=list)
    harnesses: list[str] = Field(default_factory=list)
    escalation: EscalationConfig | None = None  # this room's; else [escalation]

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if v == DEFAULT_ROOM:
            raise ValueError(f"{DEFAULT_ROOM!r} is the [matrix] room's name; pick another")
        return v


def check_rooms(
    rooms: list[RoomConfig], default_room: str, agent_tokens: Mapping[str, str], harnesses: set[str]
) -> None:
    """ValueError naming the key when two rooms share a name, a room id or alias, a token or a harness,
    or when a room names a token that is not an agent token or a harness that is not configured.
    ``agent_tokens``: every [[api.tokens]] name -> its role."""
    names: set[str] = set()
    places = {default_room: DEFAULT_ROOM}
    owner: dict[tuple[str, str], str] = {}
    for i, r in enumerate(rooms):
        if r.name in names:
            raise ValueError(f'rooms.{i}.name: "{r.name}" is used twice')
        names.add(r.name)
        if r.room in places:
            raise ValueError(f'rooms.{i}.room: {r.room} is already room "{places[r.room]}"')
        places[r.room] = r.name
        for key, values, known in (("tokens", r.tokens, None), ("harnesses", r.harnesses, harnesses)):
            for v in values:
                if key == "tokens" and agent_tokens.get(v) != "agent":
                    why = "is not an agent token" if v in agent_tokens else "is not a token in [[api.tokens]]"
                    raise ValueError(f'rooms.{i}.tokens: "{v}" {why}')
                if known is not None and v not in known:
                    raise ValueError(f'rooms.{i}.harnesses: "{v}" is not a harness in [[harnesses]]')
                if (key, v) in owner:
                    raise ValueError(f'rooms.{i}.{key}: "{v}" is already in room "{owner[(key, v)]}"')
                owner[(key, v)] = r.name
