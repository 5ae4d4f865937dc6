"""An encrypted station room and a plain one at once (issue 26): one bot, one device, each room with its
own encryption and answerers. The default room is encrypted (alice and bob answer on encrypting
devices); ``plain`` is not (dave answers), and agent-b's requests go there."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.demo.homeserver import Homeserver
from tests.support.e2e_human import E2EStation
from tests.support.human import Human, content
from tests.support.station import AGENT_B_TOKEN, AGENT_TOKEN, request_body

pytestmark = pytest.mark.e2e


class TwoRooms(E2EStation):
    """The encrypted station plus the plain room ``plain`` (dave, its answerer; carol, a plain reader)."""

    async def setup(self) -> None:
        self.make_people_and_room()
        self.dave = Human(self.hs, f"dave{self.tag}")
        self.plain_id = self.hs.create_room(self.dave.token, invite=[self.bot_id], name="plain")
        await self.dave.start(self.plain_id)
        self.extra_config = (
            f'[[rooms]]\nname = "plain"\nroom = "{self.plain_id}"\n'
            f'answerers = {{ users = ["{self.dave.user_id}"] }}\ntokens = ["{AGENT_B_TOKEN[0]}"]\n'
        )
        await self.start_all()
        for h in (self.alice, self.bob):
            await h.wait_devices(self.bot_id)

    async def teardown(self) -> None:
        await self.dave.close()
        await super().teardown()


@pytest.fixture(scope="module")
async def two(homeserver: Homeserver, workdir: Path) -> AsyncIterator[TwoRooms]:
    st = TwoRooms(homeserver, workdir / "rooms-e2ee", "rooms2")
    await st.setup()
    yield st
    await st.teardown()


async def test_an_encrypted_and_a_plain_room_at_once(two: TwoRooms, sid: str) -> None:
    enc = await two.post(request_body(sid + "e"), token=AGENT_TOKEN[1])
    plain = await two.post(request_body(sid + "p"), token=AGENT_B_TOKEN[1])
    assert (enc["room"], plain["room"]) == ("default", "plain")
    secret = await two.prompt_for(enc["session_id"], human=two.alice)  # decrypted by alice's device
    assert secret, "no decrypted prompt in the encrypted room"
    wire = await two.carol.wait(lambda e: e.get("event_id") == secret["event_id"], 10)
    assert wire and wire["type"] == "m.room.encrypted"
    clear = await two.prompt_for(plain["session_id"], human=two.dave)
    assert clear and clear["type"] == "m.room.message" and content(clear)["request_id"] == plain["id"]
    # alice's encrypted reply in her room names the plain room's prompt: nothing; dave's plain reply settles
    await two.alice.text("1", reply_to=clear["event_id"])
    await two.alice.text("2", reply_to=secret["event_id"])
    await two.dave.text("3", reply_to=clear["event_id"])
    got_enc = await two.record(enc["id"], wait=20)
    got_plain = await two.record(plain["id"], wait=20)
    assert got_enc["outcome"]["answered_by"] == two.alice.user_id and got_enc["outcome"]["option_id"] == "allow_always"
    assert got_plain["outcome"]["answered_by"] == two.dave.user_id
    assert got_plain["outcome"]["option_id"] == "reject_once"
    edit = await two.edit_of(clear["event_id"], human=two.dave)
    assert edit and edit["type"] == "m.room.message"  # the plain room's edit is in the clear
    _, health = await two.ahttp("GET", "/healthz", token=None)
    rooms = {r["name"]: r for r in health["rooms"]}
    assert rooms["default"]["encrypted"] and not rooms["plain"]["encrypted"], health
