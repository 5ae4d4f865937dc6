"""What the bot tracks of the station room's state: power levels and creators (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Room versions in which the creators hold unlimited power and are left out of `users`.
_CREATOR_POWER_VERSIONS_PREFIX = ("12",)
INFINITE = 1 << 62


class RoomState:
    """Power levels, creators and encryption of one room, fed from raw state events."""

    def __init__(self) -> None:
        self.power_levels: dict[str, Any] = {}
        self.creators: set[str] = set()
        self.room_version = "1"
        self.encrypted = False
        self.members: set[str] = set()

    def apply(self, event: Mapping[str, Any]) -> None:
        """Take one state event (raw dict) into account; ignores anything malformed."""
        if not isinstance(event, Mapping) or "state_key" not in event:
            return
        content = event.get("content")
        if not isinstance(content, Mapping):
            return
        etype = event.get("type")
        if etype == "m.room.power_levels" and event.get("state_key") == "":
            self.power_levels = dict(content)
        elif etype == "m.room.create" and event.get("state_key") == "":
            version = content.get("room_version", "1")
            self.room_version = version if isinstance(version, str) else "1"
            sender = event.get("sender")
            self.creators = {sender} if isinstance(sender, str) else set()
            extra = content.get("additional_creators")
            if isinstance(extra, list):
                self.creators |= {x for x in extra if isinstance(x, str)}
        elif etype == "m.room.encryption" and event.get("state_key") == "":
            self.encrypted = True
        elif etype == "m.room.member":
            who = event.get("state_key")
            if isinstance(who, str):
                if content.get("membership") == "join":
                    self.members.add(who)
                else:
                    self.members.discard(who)

    def power_of(self, user_id: str) -> int:
        """The user's power level in this room (creators of v12 rooms: unlimited)."""
        if self.room_version.startswith(_CREATOR_POWER_VERSIONS_PREFIX) and user_id in self.creators:
            return INFINITE
        users = self.power_levels.get("users")
        if isinstance(users, Mapping) and user_id in users:
            v = users[user_id]
            return v if isinstance(v, int) and not isinstance(v, bool) else 0
        if not self.power_levels and user_id in self.creators:
            return 100  # before any power_levels event, the creator has 100
        default = self.power_levels.get("users_default", 0)
        return default if isinstance(default, int) and not isinstance(default, bool) else 0

    def power_needed(self, event_type: str) -> int:
        """The power level needed to send ``event_type`` (its own level, else events_default)."""
        events = self.power_levels.get("events")
        if isinstance(events, Mapping) and isinstance(events.get(event_type), int):
            return int(events[event_type])
        default = self.power_levels.get("events_default", 0)
        return default if isinstance(default, int) and not isinstance(default, bool) else 0

    def state_power_needed(self, event_type: str) -> int:
        """The power level needed to set a state event of ``event_type`` (its own level, else state_default:
        50 when the room has power levels without it, 0 before any)."""
        events = self.power_levels.get("events")
        if isinstance(events, Mapping) and isinstance(events.get(event_type), int):
            return int(events[event_type])
        default = self.power_levels.get("state_default", 50 if self.power_levels else 0)
        return default if isinstance(default, int) and not isinstance(default, bool) else 50


def may_answer(user_id: str, *, users: list[str], min_power_level: int | None, room: RoomState) -> bool:
    """Fail closed: listed users, or room members at or above ``min_power_level`` when set."""
    if user_id in users:
        return True
    if min_power_level is None:
        return False
    return user_id in room.members and room.power_of(user_id) >= min_power_level
