"""The station-room sync filter: created once on the homeserver, its id kept, reused after a restart.

As maubot does (``POST /user/{id}/filter``, the id stored beside the session). The filter keeps
what the bot reads and nothing else: the station room's timeline events it handles (messages,
reactions, redactions, encrypted events, and the state it tracks: members, power levels, create,
encryption), all of them from every sender (the bot's own prompts and settled edits are timeline
marks the plain-answer binding needs). No presence, no account data (the bot reads its secret storage
over the API, never from sync), no typing or receipts. Invites are not subject to a room filter, so
an invite back into the station room still arrives; to-device messages and device lists (E2EE) are
never filtered.

Members are NOT lazy-loaded: the answerers by power level need every member (``RoomState.members``),
nio shares the Megolm session with the members it knows, and the cross-signed trust policy checks them
all; Synapse's lazy-loading also withholds a member it believes this device already saw, which a
restarted bot (state rebuilt from scratch) did not keep.

The kept entry names the user and a hash of the definition: a new room or a new definition makes a new
filter. A sync refused because the server no longer knows the id (``M_INVALID_PARAM`` / ``M_NOT_FOUND``)
drops it, and the next sync creates it again. When the upload fails the definition is sent inline.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog
from nio import UploadFilterResponse

from bot.matrix.retry import NETWORK_ERRORS, describe, retry
from bot.matrix.station import Station
from bot.util.digest import digest_params

log = structlog.get_logger("matrix")

FILTER_KEY = "matrix.sync_filter"  # {"user_id", "hash", "filter_id"}
UNKNOWN_FILTER = frozenset({"M_INVALID_PARAM", "M_NOT_FOUND"})  # Synapse: 400 M_INVALID_PARAM "No such filter"

TIMELINE_TYPES = [
    "m.room.message", "m.reaction", "m.room.redaction", "m.room.encrypted",
    "m.room.member", "m.room.power_levels", "m.room.create", "m.room.encryption",
    # a reader sees these too: look-alikes (bot.answers.timeline)
    "m.sticker", "m.poll.start", "org.matrix.msc3381.poll.start",
]
STATE_TYPES = ["m.room.member", "m.room.power_levels", "m.room.create", "m.room.encryption"]
NOTHING: dict[str, Any] = {"not_types": ["*"]}


def station_filter(room_id: str | list[str]) -> dict[str, Any]:
    """The filter definition: only what the bot reads of the station rooms ``room_id``."""
    return {
        "presence": NOTHING,
        "account_data": NOTHING,
        "room": {
            "rooms": [room_id] if isinstance(room_id, str) else sorted(room_id),
            "timeline": {"types": TIMELINE_TYPES},
            "state": {"types": STATE_TYPES, "lazy_load_members": False},
            "ephemeral": NOTHING,
            "account_data": NOTHING,
        },
    }


class SyncFilter:
    """The filter the sync loop passes: the kept id, else a new one, else the definition inline."""

    def __init__(self, st: Station, room_ids: Callable[[], list[str]]) -> None:
        """``room_ids``: every station room's id."""
        self.st = st
        self.room_ids = room_ids
        self._current: str | dict[str, Any] | None = None

    async def get(self) -> str | dict[str, Any]:
        """The filter id to sync with (created and kept once), or the definition inline."""
        if self._current is not None:
            return self._current
        definition = station_filter(self.room_ids())
        want = {"user_id": self.st.user_id, "hash": digest_params(definition)}
        kept = await self.st.kv.get_json(FILTER_KEY)
        if isinstance(kept, dict) and {k: kept.get(k) for k in want} == want and isinstance(kept.get("filter_id"), str):
            self._current = str(kept["filter_id"])
            return self._current
        try:
            r = await retry("upload_filter", lambda: self.st.client.upload_filter(
                user_id=self.st.user_id, presence=definition["presence"],
                account_data=definition["account_data"], room=definition["room"],
            ), attempts=3)
        except NETWORK_ERRORS as e:
            r = e
        if not isinstance(r, UploadFilterResponse):
            why = describe(r) if isinstance(r, BaseException) else f"{getattr(r, 'status_code', '')}: {r}"
            log.warning("sync_filter_not_created", error=why, fallback="the filter sent inline")
            self._current = definition  # tried again after the next restart
            return definition
        await self.st.kv.set_json(FILTER_KEY, {**want, "filter_id": r.filter_id})
        log.info("sync_filter_created", filter_id=r.filter_id)
        self._current = r.filter_id
        return self._current

    async def refused(self, code: str) -> None:
        """The sync was refused with ``code``: when it names our kept id as unknown, drop it."""
        if code in UNKNOWN_FILTER and isinstance(self._current, str):
            log.warning("sync_filter_unknown", filter_id=self._current, action="creating it again")
            self._current = None
            await self.st.kv.set_json(FILTER_KEY, None)
