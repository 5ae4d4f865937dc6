"""Other people's cross-signing identities, for ``trust = "cross-signed"``.

What ``/keys/query`` says about the station's members, checked here: which of their
devices are cross-signed by their owner (device <- self-signing key <- master key), and
each member's master key, pinned in the inbox's key/value table the first time it is
seen. A member whose published master key is no longer the pinned one has *changed
identity*: none of their devices is trusted until an operator accepts the new one
(``permission-bot e2ee accept-identity USER``, which rewrites the pin).

A member first seen with devices but no identity is recorded as such, with those devices' keys (the pin
holds ``{"master": null, "seen_without": true, "devices": {device id: ed25519}}``). An identity that
appears later is pinned when one of those recorded devices signed its master key (a client that makes
the account's first identity signs it with its own device: a person's first Element login, which the
bot may see a moment before the identity); otherwise it is refused like a changed one until accepted,
since whoever has only the member's password can upload a first identity (the homeserver asks no
password for it, MSC3967) but cannot sign with a device the bot saw before. A member first seen with
an identity, or with no device at all, is pinned on first sight.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import structlog

from bot.matrix.cross_signing import Api
from bot.matrix.signing import cross_signed, key_of, verify
from bot.matrix.station import KeyValue

log = structlog.get_logger("matrix.identities")

PIN_KEY = "matrix.identity."  # + user id: {"master": public key} pinned on first sight
SEEN_WITHOUT: dict[str, Any] = {"master": None, "seen_without": True}  # devices seen, no identity (+ "devices")
REFRESH_EVERY = 10.0  # seconds between two /keys/query rounds when nothing asks for one


@dataclass
class UserKeys:
    """One member as the last query showed them."""

    master: str | None = None
    pinned: str | None = None
    devices: dict[str, str] = field(default_factory=dict)  # cross-signed device id -> its ed25519 key
    any_device: bool = False  # the homeserver lists at least one device, signed or not
    listed: dict[str, str] = field(default_factory=dict)  # every self-signed device id -> its ed25519 key
    master_key: Mapping[str, Any] | None = field(default=None, repr=False)  # the published master key object
    seen_without: bool = False  # the bot saw this member's devices with no identity (and nothing is pinned)

    @property
    def changed(self) -> bool:
        return bool(self.master and self.pinned and self.master != self.pinned)

    @property
    def appeared(self) -> bool:
        """An identity published after the bot saw the member without one, not accepted yet."""
        return bool(self.master and not self.pinned and self.seen_without)


class Pin(NamedTuple):
    """A stored pin: the accepted master key, or that the member was seen without one and with which devices."""

    master: str | None
    seen_without: bool
    devices: dict[str, str]  # seen without: device id -> ed25519 key, as first recorded (may be empty)


def read_pin(value: Any) -> Pin:
    """Pure: a stored pin as a ``Pin`` (anything else: nothing pinned, not seen without)."""
    if not isinstance(value, Mapping):
        return Pin(None, False, {})
    master = value.get("master")
    if isinstance(master, str) and master:
        return Pin(master, False, {})
    if value.get("seen_without") is not True:
        return Pin(None, False, {})
    devs = value.get("devices")
    known = {k: v for k, v in devs.items() if isinstance(k, str) and isinstance(v, str)} if isinstance(
        devs, Mapping) else {}
    return Pin(None, True, known)


def seen_without(devices: Mapping[str, str]) -> dict[str, Any]:
    """Pure: the pin recording a member seen with ``devices`` (id -> ed25519) and no identity."""
    return {**SEEN_WITHOUT, "devices": dict(devices)}


def vouching_device(user: str, master_key: Any, known: Mapping[str, str]) -> str | None:
    """Pure: the device among ``known`` (id -> ed25519 key, recorded before any identity) whose key signed
    ``master_key``, ``user``'s master key object; None when none did."""
    if not isinstance(master_key, Mapping) or master_key.get("user_id") != user:
        return None
    for dev_id, ed25519 in sorted(known.items()):
        if verify(master_key, user, ed25519, key_id=f"ed25519:{dev_id}"):
            return dev_id
    return None


def read_query(q: Mapping[str, Any], users: Iterable[str]) -> dict[str, UserKeys]:
    """Pure: each user's master key and cross-signed devices from a ``/keys/query`` answer."""
    out: dict[str, UserKeys] = {}
    masters, ssks = q.get("master_keys") or {}, q.get("self_signing_keys") or {}
    for user in users:
        uk = UserKeys(master=key_of(masters.get(user)))
        uk.master_key = masters.get(user) if uk.master else None
        for dev_id, dev in ((q.get("device_keys") or {}).get(user) or {}).items():
            if not isinstance(dev, Mapping) or dev.get("device_id") != dev_id:
                continue
            uk.any_device = True
            own = (dev.get("keys") or {}).get(f"ed25519:{dev_id}") if isinstance(dev.get("keys"), Mapping) else None
            if isinstance(own, str) and dev.get("user_id") == user and verify(dev, user, own, f"ed25519:{dev_id}"):
                uk.listed[dev_id] = own
            if isinstance(own, str) and cross_signed(user, masters.get(user), ssks.get(user), dev):
                uk.devices[dev_id] = own
        out[user] = uk
    return out


class Identities:
    """The members' identities and cross-signed devices, refreshed from the homeserver."""

    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv
        self.users: dict[str, UserKeys] = {}
        self._last = -REFRESH_EVERY

    def signed(self, user_id: str, device_id: str, ed25519: str) -> bool:
        """Is this device cross-signed by its owner (under whatever identity they publish now)?"""
        uk = self.users.get(user_id)
        return bool(uk and uk.master and uk.devices.get(device_id) == ed25519)

    def trusted(self, user_id: str, device_id: str, ed25519: str) -> bool:
        """Is this device cross-signed by its owner, under the owner's pinned identity?"""
        return self.signed(user_id, device_id, ed25519) and not self.refused(user_id)

    def refused(self, user_id: str) -> bool:
        """Is the published identity one whose devices must not answer until an operator accepts it?"""
        uk = self.users.get(user_id)
        return bool(uk and (uk.changed or uk.appeared))

    def due(self, now: float | None = None) -> bool:
        return (time.monotonic() if now is None else now) - self._last >= REFRESH_EVERY

    async def refresh(self, api: Api, users: Iterable[str]) -> None:
        """Query ``users``' keys, pin first-seen master keys (or record a member seen with devices but
        no identity, and pin an identity that appears later signed by one of those devices), and re-read
        every pin (an operator may have accepted a new identity meanwhile). Errors keep the previous view."""
        users = sorted(set(users))
        self._last = time.monotonic()
        if not users:
            return
        try:
            q = await api.query(users)
        except Exception as e:
            log.warning("identities_query_failed", error=f"{type(e).__name__}: {e}")
            return
        fresh = read_query(q, users)
        for user, uk in fresh.items():
            pin = read_pin(await self.kv.get_json(PIN_KEY + user))
            uk.pinned, uk.seen_without = pin.master, pin.seen_without
            before = self.users.get(user)
            if uk.master is None and uk.any_device and not uk.pinned and not uk.seen_without:
                await self.kv.set_json(PIN_KEY + user, seen_without(uk.listed))
                uk.seen_without = True
                log.info("identity_absent", user_id=user, devices=sorted(uk.listed),
                         hint="an identity that appears later is refused until accepted, unless one of these "
                              "devices signed it")
            elif uk.master and not uk.pinned and not uk.seen_without:
                await self.kv.set_json(PIN_KEY + user, {"master": uk.master})
                uk.pinned = uk.master
                log.info("identity_pinned", user_id=user, master=uk.master)
            elif uk.appeared and (dev := vouching_device(user, uk.master_key, pin.devices)):
                await self.kv.set_json(PIN_KEY + user, {"master": uk.master})
                uk.pinned, uk.seen_without = uk.master, False
                log.info("identity_pinned", user_id=user, master=uk.master, signed_by_device=dev,
                         reason="a device seen before the identity signed it")
            elif uk.appeared and not (before and before.appeared):
                log.warning("identity_appeared", user_id=user, published=uk.master,
                            hint=f"check with them, then permission-bot e2ee accept-identity {user}")
            elif uk.changed and not (before and before.changed):
                log.warning("identity_changed", user_id=user, pinned=uk.pinned, published=uk.master,
                            hint=f"permission-bot e2ee accept-identity {user}")
        self.users.update(fresh)
