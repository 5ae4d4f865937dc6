"""The ``[matrix] trust`` policy: which devices get the room keys, and whose answers count."""

from __future__ import annotations

from typing import Any

import structlog

from bot.matrix.cross_signing import Api
from bot.matrix.crypto import ANSWER_TYPES, fingerprint, plain_event
from bot.matrix.identities import Identities
from bot.matrix.station import EventHandler, Say, Station

log = structlog.get_logger("matrix")

TOLD_UNVERIFIED_KEY = "matrix.told_unverified."  # + sender + "." + device: that sender's device was told
TOLD_IDENTITY_KEY = "matrix.told_identity."  # + sender + "." + published master key: told it changed


def room_devices(client: Any, room: Any) -> list[Any]:
    """Every active device of the room's members (joined and invited) but the bot's own."""
    assert client.olm is not None
    return [dev for user in list(room.users) for dev in list(client.olm.device_store.active_user_devices(user))
            if not (user == client.user_id and dev.id == client.device_id)]


class Trust:
    """cross-signed, tofu or verified-only, applied to nio's device trust and to every incoming event."""

    def __init__(self, st: Station, say: Say, refused: EventHandler | None = None) -> None:
        self.st = st
        self._say = say
        self._pins = {(d.user_id, d.device_id): d.ed25519 for d in st.cfg.verified_devices}
        self._logged_mismatch: set[tuple[str, str, str]] = set()
        self.identities = Identities(st.kv)
        # Sees each event the policy refuses (never an answer, but a reader still sees it).
        self.refused = refused

    @property
    def cross_signed(self) -> bool:
        return self.st.cfg.trust == "cross-signed"

    async def refresh(self, force: bool = False, users: list[str] | None = None) -> None:
        """cross-signed: re-read the members' identities (at most every few seconds unless forced)."""
        c = self.st.client
        if not self.cross_signed or c.olm is None or not c.access_token:
            return
        if not (force or users or self.identities.due()):
            return
        room = c.rooms.get(self.st.room_id)
        members = users or (list(room.users) if room is not None else [])
        await self.identities.refresh(Api(self.st.cfg.homeserver, c.access_token), members)

    def apply(self) -> None:
        """Bring nio's device trust in line with ``[matrix] trust``.

        tofu: every device of a member gets the room keys (devices are pinned to the
        ed25519 key first seen by nio). verified-only: only the devices listed in
        ``verified_devices`` with a matching ed25519 key are verified; all others are
        blacklisted and get no keys. cross-signed: only devices cross-signed by their owner
        (as Element shares them); a member whose identity changed still reads the prompts (and
        the notice telling them why their answers are refused) under the identity they publish.
        """
        c = self.st.client
        if c.olm is None:
            return
        room = c.rooms.get(self.st.room_id)
        if room is None or not room.encrypted:
            return
        olm = c.olm
        for dev in room_devices(c, room):
            if self.st.cfg.trust == "tofu":
                if olm.is_device_blacklisted(dev):
                    c.unblacklist_device(dev)
                    log.info("device_unblacklisted", user_id=dev.user_id, device_id=dev.id, reason="trust = tofu")
                continue
            if self.cross_signed:
                ok, why = self.identities.signed(dev.user_id, dev.id, dev.ed25519), {"reason": "cross-signed"}
            else:
                pin = self._pins.get((dev.user_id, dev.id))
                ok, why = pin is not None and pin == dev.ed25519, {}
                if pin is not None and not ok and (dev.user_id, dev.id, dev.ed25519) not in self._logged_mismatch:
                    self._logged_mismatch.add((dev.user_id, dev.id, dev.ed25519))
                    log.error("verified_device_key_mismatch", user_id=dev.user_id, device_id=dev.id,
                              homeserver_key=fingerprint(dev.ed25519),
                              hint="the device's key is not the one in matrix.verified_devices; it gets no keys")
            if ok:
                if not olm.is_device_verified(dev):
                    c.verify_device(dev)
                    log.info("device_verified", user_id=dev.user_id, device_id=dev.id, **why)
            elif not olm.is_device_blacklisted(dev):
                c.blacklist_device(dev)
                log.info("device_blacklisted", user_id=dev.user_id, device_id=dev.id,
                         reason="not cross-signed" if self.cross_signed else "not verified")

    async def admit(self, ev: Any, wrapper: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """The event as the handler sees it (plaintext-shaped), or None when the trust policy refuses it."""
        decrypted = bool(getattr(ev, "decrypted", False))
        source: dict[str, Any] = plain_event(ev.source, wrapper) if decrypted else ev.source
        admitted = await self._admit(ev, source, decrypted)
        if admitted is None and self.refused is not None:
            await self.refused(source)
        return admitted

    async def _admit(self, ev: Any, source: dict[str, Any], decrypted: bool) -> dict[str, Any] | None:
        if self.st.cfg.trust == "tofu" or self.st.client.olm is None:
            return source
        if source.get("type") not in ANSWER_TYPES or source.get("sender") == self.st.user_id:
            return source
        if self.cross_signed:  # in an unencrypted room there are no devices to check: every answer is plaintext
            return await self._admit_cross_signed(source, ev, decrypted) if self.st.encrypted else source
        dev = self._sending_device(ev) if decrypted else None
        if dev is not None and self._pins.get((ev.sender, dev.id)) == dev.ed25519:
            return source
        await self._tell_unverified(source, ev)
        return None

    async def _admit_cross_signed(self, source: dict[str, Any], ev: Any, decrypted: bool) -> dict[str, Any] | None:
        sender = str(source.get("sender", ""))
        dev = self._sending_device(ev) if decrypted else None
        if dev is not None and not self.identities.trusted(sender, dev.id, dev.ed25519):
            await self.refresh(users=[sender])  # a device or an accepted identity the last query did not show
        if dev is not None and self.identities.trusted(sender, dev.id, dev.ed25519):
            return source
        if self.identities.refused(sender):
            await self._tell_identity_changed(source)
        else:
            await self._tell_unverified(source, ev)
        return None

    async def _tell_identity_changed(self, source: dict[str, Any]) -> None:
        """Once per member and identity: why their answers don't count, and what fixes it."""
        sender = str(source.get("sender", ""))
        uk = self.identities.users[sender]
        published, appeared = uk.master or "", uk.appeared
        log.warning("event_from_appeared_identity" if appeared else "event_from_changed_identity",
                    event_id=source.get("event_id"), sender=sender, published=published)
        key = f"{TOLD_IDENTITY_KEY}{sender}.{published}"
        if await self.st.kv.get_json(key):
            return
        await self.st.kv.set_json(key, True)
        what = (f"a cross-signing identity (master key {fingerprint(published)}) appeared on your account after "
                "this bot had seen you without one, and anyone with your password alone can make one"
                if appeared else f"your cross-signing identity changed (new master key {fingerprint(published)})")
        self._say(f"{sender}: {what}, so this bot takes no answers from you until an operator checks with you and "
                  f"accepts it: `permission-bot e2ee accept-identity {sender}`. Your message changed nothing.",
                  reply_to=str(source.get("event_id") or "") or None)

    def _sending_device(self, ev: Any) -> Any:
        """nio's record of the device that sent this Megolm event, when the session is its own (not forwarded)."""
        olm = self.st.client.olm
        sender, sender_key, session_id = ev.sender, getattr(ev, "sender_key", None), getattr(ev, "session_id", None)
        if olm is None or not sender_key or not session_id:
            return None
        session = olm.inbound_group_store.get(self.st.room_id, sender_key, session_id)
        if session is None or session.forwarding_chain:
            return None
        dev = olm.device_store.device_from_sender_key(sender, sender_key)
        return dev if dev is not None and session.ed25519 == dev.ed25519 else None

    async def _tell_unverified(self, source: dict[str, Any], ev: Any) -> None:
        c = self.st.client
        sender = str(source.get("sender", ""))
        device = str(getattr(ev, "device_id", None) or source.get("content", {}).get("device_id") or "")
        if not device and isinstance(getattr(ev, "sender_key", None), str) and c.olm is not None:
            dev = c.olm.device_store.device_from_sender_key(sender, ev.sender_key)
            device = dev.id if dev is not None else ""
        log.warning("event_from_unverified_device", event_id=source.get("event_id"), sender=sender,
                    device_id=device or None, encrypted=bool(getattr(ev, "decrypted", False)))
        key = f"{TOLD_UNVERIFIED_KEY}{sender}.{device}"
        if await self.st.kv.get_json(key):
            return
        await self.st.kv.set_json(key, True)
        where = f"your device {device}" if device else "this unencrypted message's device"
        self._say(
            f"{sender}: this bot only takes answers from devices cross-signed by their owner (trust = "
            f"cross-signed), and {where} is not, so your message changed nothing. Verify this device "
            "from another one of yours (Element: Settings > Sessions), or answer from a verified one."
            if self.cross_signed else
            f"{sender}: this bot only takes messages from verified devices (trust = verified-only), and "
            f"{where} is not one of them, so your message changed nothing. Answer from a verified device, "
            "or ask the operator to add it to matrix.verified_devices.",
            reply_to=str(source.get("event_id") or "") or None,
        )
