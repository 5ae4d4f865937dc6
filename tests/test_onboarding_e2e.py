"""A person sets up Element (matrix-js-sdk with its Rust crypto) while the bot watches (real Synapse,
trust = "cross-signed"): her first login uploads the device's keys, then, a moment later, the account's first
cross-signing identity, which that device signs. The bot may see the device before the identity (it then records
her as seen without one); her identity is still trusted, with no admin step, because the device the bot saw
signed it. A stolen password cannot do the same: see test_cross_signing_e2e's stolen-password test."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from bot.demo.homeserver import Homeserver, http
from bot.matrix.identities import PIN_KEY
from bot.matrix.signing import key_of, verify
from tests.support.station import request_body
from tests.test_cross_signing_e2e import XSStation

pytestmark = pytest.mark.e2e

ROUNDS = 6  # the lock-out was a race (3 of 5 runs): half the rounds make it certain, half leave it to timing
PASSWORD = "onboard-pw"


class OnboardStation(XSStation):
    """The cross-signed station plus newcomers: answerers in the room who have never logged in anywhere with
    encryption (their accounts have no device keys and no identity)."""

    def make_people_and_room(self) -> None:
        super().make_people_and_room()
        self.newcomers: list[str] = []
        for i in range(ROUNDS):
            reg = self.hs.register(f"new{self.tag}{i}", PASSWORD)
            http("POST", f"{self.hs.url}/_matrix/client/v3/rooms/{quote(self.room_id)}/invite",
                 {"user_id": reg["user_id"]}, self.alice.token)
            self.hs.join(reg["access_token"], self.room_id)
            self.newcomers.append(str(reg["user_id"]))

    def config_text(self, **matrix: str) -> str:
        people = [self.alice.user_id, self.bob.user_id, *self.newcomers]
        text = super().config_text(**matrix)
        old = f'users = ["{self.alice.user_id}", "{self.bob.user_id}"]'
        assert old in text
        return text.replace(old, "users = [" + ", ".join(f'"{u}"' for u in people) + "]")


@pytest.fixture(scope="module")
async def ob(homeserver: Homeserver, workdir: Path) -> AsyncIterator[OnboardStation]:
    st = OnboardStation(homeserver, workdir / "onboard", "ob", trust="cross-signed")
    await st.setup()
    yield st
    await st.teardown()


async def _until(what: str, check: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.1)


def _signed_by_device(obj: dict[str, Any], user: str, device_id: str, ed25519: str) -> bool:
    """Does ``obj`` carry a valid signature by the device's ed25519 key (key id ``ed25519:DEVICE``)?"""
    sig = obj.get("signatures", {}).get(user, {}).get(f"ed25519:{device_id}")
    return isinstance(sig, str) and verify({**obj, "signatures": {user: {f"ed25519:{ed25519}": sig}}}, user, ed25519)


@pytest.mark.parametrize("round_", range(ROUNDS))
async def test_a_person_who_sets_up_element_while_the_bot_watches_can_answer(
    ob: OnboardStation, sid: str, round_: int
) -> None:
    user, name = ob.newcomers[round_], f"new{round_}"
    assert ob.kv(PIN_KEY + user) is None  # the bot has seen no device of hers yet
    me = await ob.js.call("login", name=name, hs=ob.hs.url, user=user, password=PASSWORD, cross_sign=False,
                          isolation="signed")  # her device keys go up with the client's first requests
    device = me["device_id"]
    if round_ % 2 == 0:  # the order that locked her out, made certain: the bot records her device, no identity
        await _until("the bot never saw her device", lambda: (ob.kv(PIN_KEY + user) or {}).get("seen_without"))
    master = (await ob.js.call("bootstrap_cross_signing", name=name))["master"]
    q = ob.keys(user)
    assert key_of(q["master_keys"][user]) == master
    ed = q["device_keys"][user][device]["keys"][f"ed25519:{device}"]
    assert _signed_by_device(q["master_keys"][user], user, device, ed), "her device did not sign her master key"
    await _until("the bot never took her device as cross-signed", lambda: any(
        "device_verified" in ln and device in ln and "cross-signed" in ln for ln in ob.log_text().splitlines()))
    rec = await ob.post(request_body(sid))
    prompt = await ob.js.call("wait_event", name=name, room=ob.room_id, session_id=sid, seq=rec["request_seq"],
                              sender=ob.bot_id, timeout=40)
    assert prompt["event_id"], "the prompt never decrypted on her new device"
    await ob.js.call("send", name=name, room=ob.room_id, body="1", reply_to=prompt["event_id"])
    got = await ob.record(rec["id"], wait=30)
    assert got["state"] == "resolved", (got, [ln for ln in ob.log_text().splitlines() if user in ln])
    assert got["outcome"]["option_id"] == "allow_once" and got["outcome"]["answered_by"] == user
    assert ob.kv(PIN_KEY + user) == {"master": master}  # pinned, no `e2ee accept-identity`
    assert not any("identity_appeared" in ln and user in ln for ln in ob.log_text().splitlines())
    await ob.js.call("stop", name=name)
