"""Encrypted sending into the station room, and nio's E2EE chores after each sync."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import structlog
from nio import JoinedMembersError, KeysUploadError

from bot.matrix.crypto import clear_sharing_mark, send_raw
from bot.matrix.errors import SendFailed
from bot.matrix.key_upload import upload_keys
from bot.matrix.station import Station
from bot.matrix.trust import Trust, room_devices

log = structlog.get_logger("matrix")

UNREACHABLE_RETRY = 300.0  # a device the bot could not open an Olm session with is retried after this


class E2EE:
    """The Megolm session of the station room: shared with the devices the trust policy allows."""

    def __init__(self, st: Station, trust: Trust, lock: asyncio.Lock | None = None) -> None:
        """``lock``: shared by every room's E2EE of one client (one Olm account, one key query at a time)."""
        self.st = st
        self.trust = trust
        self._lock = lock or asyncio.Lock()
        self._unreachable: dict[tuple[str, str], float] = {}

    async def housekeeping(self) -> None:
        """nio's E2EE chores after a sync: to-device messages, key upload, query and claim."""
        c = self.st.client
        if c.olm is None:
            return
        async with self._lock:
            try:
                if c.outgoing_to_device_messages:
                    await c.send_to_device_messages()
                if c.should_upload_keys:
                    r = await upload_keys(c)
                    if isinstance(r, KeysUploadError):
                        log.error("keys_upload_failed", error=f"{r.status_code}: {r.message}")
                queried = c.should_query_keys
                if queried:
                    await c.keys_query()
                if c.should_claim_keys:
                    await c.keys_claim(c.get_users_for_key_claiming())
                await self.trust.refresh(force=queried)
            except Exception as e:
                log.warning("crypto_housekeeping_failed", error=f"{type(e).__name__}: {e}")
            self.trust.apply()

    def encrypting(self) -> bool:
        """Do sends into the station room get encrypted?"""
        c = self.st.client
        if c.olm is None:
            return False
        room = c.rooms.get(self.st.room_id)
        return self.st.room_id in c.encrypted_rooms or bool(room and room.encrypted)

    async def send(self, event_type: str, content: dict[str, Any], txn: str) -> Any:
        """Encrypt with the room's Megolm session (shared first when needed) and send with ``txn``.

        nio's room_send leaves reactions in the clear; this path encrypts every event type
        (the relation stays in the clear too, as the spec wants) and applies the trust policy.
        """
        c, rid = self.st.client, self.st.room_id
        async with self._lock:
            room = c.rooms.get(rid)
            if room is None:
                raise SendFailed("the station room is not synced yet")
            if not room.members_synced:
                m = await c.joined_members(rid)
                if isinstance(m, JoinedMembersError):
                    raise SendFailed(f"joined_members: {m.message}")
            queried = c.should_query_keys
            if queried:
                await c.keys_query()
            await self.trust.refresh(force=queried)
            self.trust.apply()
            if self._new_devices(room):
                c.invalidate_outbound_session(rid)
            assert c.olm is not None
            if c.olm.should_share_group_session(rid):
                # Every share goes through this lock, so a leftover mark is stale: nio leaves it
                # behind when claiming one-time keys fails, and would then refuse to share forever.
                clear_sharing_mark(c, rid)
                await c.share_group_session(rid, ignore_unverified_devices=self.st.cfg.trust == "tofu")
                self._note_unreachable(room)
            etype, encrypted = c.encrypt(rid, event_type, content)
        return await send_raw(c, rid, etype, encrypted, txn)

    def _new_devices(self, room: Any) -> bool:
        """Has a device appeared that the current Megolm session was not shared with?

        nio keeps sharing one session until it expires, so a member's new device (or the
        member's first one after a keys query) would never get it. Then the session is
        rotated. A device without one-time keys is not retried before UNREACHABLE_RETRY.
        """
        now = time.monotonic()
        for dev in self._left_out(room, shared=True):
            if now - self._unreachable.get((dev.user_id, dev.id), -UNREACHABLE_RETRY) >= UNREACHABLE_RETRY:
                log.info("megolm_session_rotated", reason="new device", user_id=dev.user_id, device_id=dev.id)
                return True
        return False

    def _note_unreachable(self, room: Any) -> None:
        for dev in self._left_out(room, shared=False):
            self._unreachable[(dev.user_id, dev.id)] = time.monotonic()
            log.warning("device_unreachable", user_id=dev.user_id, device_id=dev.id,
                        reason="no Olm session (no one-time keys?)")

    def _left_out(self, room: Any, *, shared: bool) -> list[Any]:
        """The room's devices the Megolm session was neither shared with nor withheld from (blacklisted); none
        without a session (``shared``: or before it is shared)."""
        c = self.st.client
        assert c.olm is not None
        sess = c.olm.outbound_group_sessions.get(self.st.room_id)
        if sess is None or (shared and not sess.shared):
            return []
        covered = sess.users_shared_with | sess.users_ignored
        return [d for d in room_devices(c, room)
                if (d.user_id, d.id) not in covered and not c.olm.is_device_blacklisted(d)]
