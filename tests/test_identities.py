"""Which identity the bot pins, from what ``/keys/query`` shows over time: a member first seen with devices
but no identity gets a later identity pinned only when one of those devices signed it; one first seen with
an identity (or with no device at all) is pinned on first sight, as before."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from bot.matrix.cross_signing import Api
from bot.matrix.identities import PIN_KEY, SEEN_WITHOUT, Identities, Pin, read_pin, seen_without
from bot.matrix.signing import Identity, SigningKey

U = "@alice:hs"


class Kv:
    def __init__(self) -> None:
        self.d: dict[str, Any] = {}

    async def get_json(self, k: str) -> Any:
        return self.d.get(k)

    async def set_json(self, k: str, v: Any) -> None:
        self.d[k] = v

    async def set_many_json(self, values: Mapping[str, Any]) -> None:
        self.d.update(values)


class FakeApi:
    """What the homeserver publishes for ``U``: devices (self-signed, signed by ``ident`` or not) and the identity,
    whose master key the devices in ``vouchers`` signed."""

    def __init__(self) -> None:
        self.ident: Identity | None = None
        self.devices: dict[str, bool] = {}  # device id -> signed by ident
        self.keys: dict[str, SigningKey] = {}  # device id -> its ed25519 key (made on first use)
        self.vouchers: list[str] = []  # devices whose keys signed the master key

    def ed(self, dev_id: str) -> str:
        return self.keys.setdefault(dev_id, SigningKey.generate()).public

    def device(self, dev_id: str, signed: bool) -> dict[str, Any]:
        dev = {"user_id": U, "device_id": dev_id, "algorithms": [], "keys": {f"ed25519:{dev_id}": self.ed(dev_id)}}
        dev = self.keys[dev_id].sign(dev, U, dev_id)
        return self.ident.self_signing.sign(dev, U) if signed and self.ident else dev

    async def query(self, users: list[str]) -> dict[str, Any]:
        q: dict[str, Any] = {"device_keys": {U: {d: self.device(d, s) for d, s in self.devices.items()}}}
        if self.ident is not None:
            objs = self.ident.public_objects(U)
            master = objs["master_key"]
            for dev_id in self.vouchers:
                self.ed(dev_id)
                master = self.keys[dev_id].sign(master, U, dev_id)
            q["master_keys"] = {U: master}
            q["self_signing_keys"] = {U: objs["self_signing_key"]}
        return q


async def _seen(ids: Identities, api: FakeApi) -> None:
    await ids.refresh(cast(Api, api), [U])


async def test_an_identity_that_appears_after_the_member_was_seen_without_one_is_refused() -> None:
    kv, api = Kv(), FakeApi()
    ids = Identities(kv)
    api.devices = {"OLD": False}
    await _seen(ids, api)  # her device, no identity: recorded, with its key
    assert kv.d[PIN_KEY + U] == seen_without({"OLD": api.ed("OLD")}) and not ids.refused(U)
    # a stolen password: a new device, a first identity which that device signed
    api.ident, api.devices["NEW"], api.vouchers = Identity.generate(), True, ["NEW"]
    await _seen(ids, api)
    assert ids.signed(U, "NEW", api.ed("NEW")) and not ids.trusted(U, "NEW", api.ed("NEW"))
    assert ids.users[U].appeared and ids.refused(U) and not ids.users[U].changed
    assert kv.d[PIN_KEY + U]["master"] is None  # nothing pinned on sight
    kv.d[PIN_KEY + U] = {"master": api.ident.master.public}  # `e2ee accept-identity`
    await _seen(ids, api)
    assert ids.trusted(U, "NEW", api.ed("NEW")) and not ids.refused(U)
    api.ident = Identity.generate()  # and later a reset is a changed identity, as before
    api.devices, api.vouchers = {"NEW": True}, ["NEW"]
    await _seen(ids, api)
    assert ids.users[U].changed and not ids.trusted(U, "NEW", api.ed("NEW"))


async def test_a_member_first_seen_with_an_identity_or_without_devices_is_pinned_on_first_sight() -> None:
    kv, api = Kv(), FakeApi()
    ids = Identities(kv)
    await _seen(ids, api)  # no device at all: nothing recorded (TOFU once one appears with an identity)
    assert PIN_KEY + U not in kv.d
    api.ident, api.devices = Identity.generate(), {"D": True}
    await _seen(ids, api)
    assert kv.d[PIN_KEY + U] == {"master": api.ident.master.public} and ids.trusted(U, "D", api.ed("D"))


def test_read_pin() -> None:
    assert read_pin({"master": "K"}) == Pin("K", False, {})
    assert read_pin(SEEN_WITHOUT) == Pin(None, True, {})  # recorded before devices were kept: none can vouch
    assert read_pin(seen_without({"D": "ed"})) == Pin(None, True, {"D": "ed"})
    assert read_pin({**SEEN_WITHOUT, "devices": {"D": 3, "E": "ed"}}) == Pin(None, True, {"E": "ed"})
    assert read_pin({**SEEN_WITHOUT, "devices": "junk"}) == Pin(None, True, {})
    assert read_pin({"master": None}) == Pin(None, False, {})
    assert read_pin("junk") == Pin(None, False, {}) and read_pin(None) == Pin(None, False, {})
    assert read_pin({"master": "K", "seen_without": True}) == Pin("K", False, {})  # an accepted pin wins


async def test_a_first_identity_signed_by_a_device_seen_before_it_is_pinned() -> None:
    """A first Element login: the bot sees the new device a moment before the identity it makes and signs."""
    kv, api = Kv(), FakeApi()
    ids = Identities(kv)
    api.devices = {"EL": False}
    await _seen(ids, api)
    assert kv.d[PIN_KEY + U] == seen_without({"EL": api.ed("EL")})
    api.ident, api.devices, api.vouchers = Identity.generate(), {"EL": True}, ["EL"]
    await _seen(ids, api)
    assert kv.d[PIN_KEY + U] == {"master": api.ident.master.public}
    assert ids.trusted(U, "EL", api.ed("EL")) and not ids.refused(U)


async def test_only_a_device_recorded_before_the_identity_with_its_key_vouches() -> None:
    """What a stolen password can add does not vouch: a device that appears after the member was recorded
    (the record is not extended), a recorded device id logged in again with new keys, an unsigned master key."""
    for attack in ("later_device", "same_id_new_key", "no_signature", "legacy_record"):
        kv, api = Kv(), FakeApi()
        ids = Identities(kv)
        api.devices = {"OLD": False}
        await _seen(ids, api)
        if attack == "legacy_record":  # recorded before the devices were kept
            kv.d[PIN_KEY + U] = dict(SEEN_WITHOUT)
            api.vouchers = ["OLD"]
        if attack == "later_device":  # seen while still without an identity: not added to the record
            api.devices["THIEF"] = False
            await _seen(ids, api)
            assert kv.d[PIN_KEY + U] == seen_without({"OLD": api.ed("OLD")})
            api.vouchers = ["THIEF"]
        if attack == "same_id_new_key":
            api.keys["OLD"] = SigningKey.generate()
            api.vouchers = ["OLD"]
        api.ident = Identity.generate()
        api.devices = {d: True for d in api.devices}
        await _seen(ids, api)
        assert ids.users[U].appeared and ids.refused(U), attack
        assert kv.d[PIN_KEY + U]["master"] is None, attack
