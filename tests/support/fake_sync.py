"""The fake homeserver's rooms and its /sync responses: pure functions over its one event stream.

Positions: ``s<N>`` means the first N events of the stream were seen. Filters are matched as Matrix
EventFilter / RoomFilter do (rooms, types, senders, their ``not_`` forms, ``*`` globs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Room:
    room_id: str
    state: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def membership(self, user: str) -> str:
        ev = self.state.get(("m.room.member", user))
        return str(ev["content"].get("membership", "leave")) if ev else "leave"


def visible(rooms: dict[str, Room], user: str, ev: dict[str, Any], flt: dict[str, Any]) -> bool:
    """Does ``ev`` wake a long-polling sync of ``user``?"""
    if ev.get("type") == "m.room.member" and ev.get("state_key") == user:
        return True
    return rooms[ev["room_id"]].membership(user) == "join" and passes(ev, flt.get("room", {}))


def sync_body(
    rooms: dict[str, Room], stream: list[dict[str, Any]], user: str, since: int | None, flt: dict[str, Any],
    full: bool, timeline_limit: int, redeliver: list[dict[str, Any]],
) -> dict[str, Any]:
    """The /sync response for ``user`` since position ``since`` (None: an initial sync), through filter ``flt``;
    ``redeliver``'s events come again at the start of their room's timeline."""
    room_flt = flt.get("room", {})
    limit = int(room_flt.get("timeline", {}).get("limit", timeline_limit))
    join: dict[str, Any] = {}
    invite: dict[str, Any] = {}
    leave: dict[str, Any] = {}
    for rid, room in rooms.items():
        mine = room.membership(user)
        if mine == "invite":
            fresh = stream[since:] if since is not None else stream
            if any(e["room_id"] == rid and e.get("state_key") == user for e in fresh):
                invite[rid] = {"invite_state": {"events": [strip(e) for e in room.state.values()]}}
            continue
        news = [
            i for i in range(since or 0, len(stream))
            if stream[i]["room_id"] == rid and passes(stream[i], room_flt.get("timeline", {}))
            and passes(stream[i], {k: v for k, v in room_flt.items() if k in ("rooms", "not_rooms")})
        ]
        if mine == "leave":
            if since is not None and any(stream[i].get("state_key") == user for i in news):
                leave[rid] = {"timeline": {"events": [client_event(stream[news[-1]])], "limited": False}}
            continue
        if mine != "join":
            continue
        again = [e for e in redeliver if e["room_id"] == rid]
        if since is not None and not news and not again and not full:
            continue
        shown = news[-limit:]
        state: list[dict[str, Any]] = []
        if since is None or full:
            state = [
                client_event(e) for e in room.state.values()
                if passes(e, room_flt.get("state", {})) and (not shown or stream.index(e) < shown[0])
            ]
        prev = f"s{shown[0]}" if shown else f"s{len(stream)}"
        join[rid] = {
            "timeline": {
                "events": [client_event(e) for e in again] + [client_event(stream[i]) for i in shown],
                "limited": len(news) > limit, "prev_batch": prev,
            },
            "state": {"events": state}, "ephemeral": {"events": []}, "account_data": {"events": []},
            "summary": {}, "unread_notifications": {},
        }
    return {
        "next_batch": f"s{len(stream)}", "rooms": {"join": join, "invite": invite, "leave": leave},
        "to_device": {"events": []}, "presence": {"events": []}, "account_data": {"events": []},
        "device_lists": {"changed": [], "left": []}, "device_one_time_keys_count": {},
    }


def passes(ev: dict[str, Any], f: dict[str, Any]) -> bool:
    """Matrix EventFilter / RoomFilter matching (rooms, not_rooms, types, not_types, senders; ``*`` globs)."""
    def hit(patterns: list[str], value: str) -> bool:
        return any(p == value or (p.endswith("*") and value.startswith(p[:-1])) for p in patterns)

    for k, attr in (("rooms", "room_id"), ("types", "type"), ("senders", "sender")):
        if k in f and not hit(f[k], str(ev.get(attr))):
            return False
        if f"not_{k}" in f and hit(f[f"not_{k}"], str(ev.get(attr))):
            return False
    return True


def client_event(ev: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in ev.items() if k != "room_id"}


def strip(ev: dict[str, Any]) -> dict[str, Any]:
    return {k: ev[k] for k in ("type", "state_key", "sender", "content")}
