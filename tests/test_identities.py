"""Which identity the bot pins, from what ``/keys/query`` shows over time (issue 32, item 1): a member
first seen with devices but no identity gets no identity pinned on sight later; one first seen with an
identity (or with no device at all) is pinned on first sight, as before."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from bot.matrix.cross_signing import Api
from bot.matrix.identities import PIN_KEY, SEEN_WITHOUT, Identities, read_pin
from bot.matrix.signing import Identity

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
    """What the homeserver publishes for ``U``: devices (signed by ``ident`` or not) and the identity."""

    def __init__(self) -> None:
        self.ident: Identity | None = None
        self.devices: dict[str, bool] = {}  # device id -> signed by ident

    def device(self, dev_id: str, signed: bool) -> dict[str, Any]:
        dev = {"user_id": U, "device_id": dev_id, "algorithms": [], "keys": {f"ed25519:{dev_id}": "ed" + dev_id}}
        return self.ident.self_signing.sign(dev, U) if signed and self.ident else dev

    async def query(self, users: list[str]) -> dict[str, Any]:
        q: dict[str, Any] = {"device_keys": {U: {d: self.device(d, s) for d, s in self.devices.items()}}}
        if self.ident is not None:
            objs = self.ident.public_objects(U)
            q["master_keys"] = {U: objs["master_key"]}
            q["self_signing_keys"] = {U: objs["self_signing_key"]}
        return q


async def _seen(ids: Identities, api: FakeApi) -> None:
    await ids.refresh(cast(Api, api), [U])


async def test_an_identity_that_appears_after_the_member_was_seen_without_one_is_refused() -> None:
    kv, api = Kv(), FakeApi()
    ids = Identities(kv)
    api.devices = {"OLD": False}
    await _seen(ids, api)  # her device, no identity: recorded
    assert kv.d[PIN_KEY + U] == SEEN_WITHOUT and not ids.refused(U)
    api.ident, api.devices["NEW"] = Identity.generate(), True  # a stolen password: a first identity, a signed device
    await _seen(ids, api)
    assert ids.signed(U, "NEW", "edNEW") and not ids.trusted(U, "NEW", "edNEW")
    assert ids.appeared(U) and ids.refused(U) and not ids.changed(U)
    assert kv.d[PIN_KEY + U] == SEEN_WITHOUT  # nothing pinned on sight
    kv.d[PIN_KEY + U] = {"master": api.ident.master.public}  # `e2ee accept-identity`
    await _seen(ids, api)
    assert ids.trusted(U, "NEW", "edNEW") and not ids.refused(U)
    api.ident = Identity.generate()  # and later a reset is a changed identity, as before
    api.devices = {"NEW": True}
    await _seen(ids, api)
    assert ids.changed(U) and not ids.trusted(U, "NEW", "edNEW")


async def test_a_member_first_seen_with_an_identity_or_without_devices_is_pinned_on_first_sight() -> None:
    kv, api = Kv(), FakeApi()
    ids = Identities(kv)
    await _seen(ids, api)  # no device at all: nothing recorded (TOFU once one appears with an identity)
    assert PIN_KEY + U not in kv.d
    api.ident, api.devices = Identity.generate(), {"D": True}
    await _seen(ids, api)
    assert kv.d[PIN_KEY + U] == {"master": api.ident.master.public} and ids.trusted(U, "D", "edD")


def test_read_pin() -> None:
    assert read_pin({"master": "K"}) == ("K", False)
    assert read_pin(SEEN_WITHOUT) == (None, True)
    assert read_pin({"master": None}) == (None, False)
    assert read_pin("junk") == (None, False) and read_pin(None) == (None, False)
    assert read_pin({"master": "K", "seen_without": True}) == ("K", False)  # an accepted pin wins
