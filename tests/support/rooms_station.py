"""A station with two rooms ([[rooms]]): the default room (alice answers) and ``infra`` (dave answers;
alice is a member there but no answerer). The infra agent token posts to infra; ``infra-cli`` decides
only infra's requests."""

from __future__ import annotations

import asyncio
import urllib.parse
from typing import Any

from nio import AsyncClient

from bot.demo.homeserver import http
from tests.support.human import Human
from tests.support.station import OwnStation

INFRA_AGENT = ("infra-proxies", "test-infra-agent-token-6d1e")
INFRA_DECIDER = ("infra-cli", "test-infra-decider-token-0a9f")


def same_person(h: Human, room_id: str) -> Human:
    """Another view of ``h``'s account that follows ``room_id`` (no second registration)."""
    v = Human.__new__(Human)
    v.localpart, v.password, v.user_id, v.token = h.localpart, h.password, h.user_id, h.token
    v.client = AsyncClient(h.client.homeserver, h.user_id, device_id=h.client.device_id)
    v.client.access_token, v.client.user_id = h.token, h.user_id
    v.events, v.room_id, v._task, v._since = [], "", None, None
    return v


class RoomsStation(OwnStation):
    """The station plus the ``infra`` room: dave (its answerer), alice (a member, not its answerer)."""

    suffix = "rooms"  # in every account's name: two such stations may share the session's homeserver

    def room_power(self) -> dict[str, int] | None:
        return {self.carol.user_id: 50}

    async def setup(self) -> None:
        self.make_people_and_room()
        self.dave = Human(self.hs, f"dave{self.suffix}")
        self.infra_id = self.hs.create_room(self.dave.token, invite=[self.bot_id, self.alice.user_id], name="infra")
        self.hs.join(self.alice.token, self.infra_id)
        self.alice_infra = same_person(self.alice, self.infra_id)
        await self.dave.start(self.infra_id)
        await self.alice_infra.start(self.infra_id)
        self.extra_config = f"""
[[rooms]]
name = "infra"
room = "{self.infra_id}"
answerers = {{ users = ["{self.dave.user_id}"] }}
tokens = ["{INFRA_AGENT[0]}"]

[[api.tokens]]
name = "{INFRA_AGENT[0]}"
role = "agent"
secret = "{INFRA_AGENT[1]}"

[[api.tokens]]
name = "{INFRA_DECIDER[0]}"
role = "decider"
secret = "{INFRA_DECIDER[1]}"
rooms = ["infra"]
"""
        await self.start_all()
        joined = await self.dave.wait(
            lambda e: e.get("type") == "m.room.member" and e.get("state_key") == self.bot_id
            and (e.get("content") or {}).get("membership") == "join", 60)
        assert joined, "the bot did not join the infra room"

    def room_call(self, room_id: str, verb: str, body: dict[str, Any], token: str) -> Any:
        """A room membership call (kick, invite) made as ``token``."""
        q = urllib.parse.quote(room_id)
        return http("POST", f"{self.hs.url}/_matrix/client/v3/rooms/{q}/{verb}", body, token)

    def hs_member(self, room_id: str) -> str:
        """The bot's membership in ``room_id``, as the room's creator (dave) reads it."""
        q = urllib.parse.quote(room_id)
        r = http("GET", f"{self.hs.url}/_matrix/client/v3/rooms/{q}/state/m.room.member/"
                 f"{urllib.parse.quote(self.bot_id)}", None, self.dave.token)
        return str(r.get("membership"))

    async def teardown(self) -> None:
        for h in (getattr(self, "dave", None), getattr(self, "alice_infra", None)):
            if h:
                await h.close()
        await super().teardown()

    async def settle(self, seconds: float = 1.5) -> None:
        """Give the bot time to read what was just sent (for the 'nothing happened' checks)."""
        await asyncio.sleep(seconds)
