"""A station of its own for the fault tests: bot ``permbot{tag}`` reaches Synapse through a FaultProxy.

The shared session station is left alone; this one has its own accounts, room, state folder and
daemon, and its homeserver URL points at the proxy.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.demo.homeserver import Homeserver
from tests.support.e2e_human import E2EStation
from tests.support.faultproxy import FaultProxy
from tests.support.human import Human
from tests.support.station import BOT_PASSWORD, Station


class FaultStation(Station):
    def __init__(self, hs: Homeserver, workdir: Path, tag: str, *, password: bool = True) -> None:
        super().__init__(hs, workdir)
        self.tag = tag
        self.password = password  # False: the daemon has only an access token
        u = urllib.parse.urlsplit(hs.url)
        self.proxy = FaultProxy(u.hostname or "127.0.0.1", u.port or 80)
        self.proxy.start()
        self.bot_token = ""

    def make_people_and_room(self) -> None:
        t = self.tag
        r = self.hs.register(f"permbot{t}", BOT_PASSWORD)
        self.bot_id, self.bot_token = r["user_id"], r["access_token"]
        self.alice = Human(self.hs, f"alice{t}")
        self.bob = Human(self.hs, f"bob{t}")
        self.carol = Human(self.hs, f"carol{t}")
        self.room_id = self.hs.create_room(
            self.alice.token, invite=[self.bot_id, self.bob.user_id, self.carol.user_id]
        )

    def config_text(self) -> str:
        text = super().config_text().replace(f'homeserver = "{self.hs.url}"', f'homeserver = "{self.proxy.url}"')
        if not self.password:
            text = re.sub(r'password = ".*"\n', f'access_token = "{self.bot_token}"\n', text, count=1)
        return text

    kv = E2EStation.kv  # a value of the daemon's key/value table, read while it runs
    log_text = E2EStation.log_text

    async def teardown(self) -> None:
        await super().teardown()
        self.proxy.stop()


def fault_station_fixture(dirname: str, tag: str) -> Any:
    """A module-scoped fixture: a FaultStation of its own (accounts ``*{tag}``) under ``workdir/dirname``."""

    @pytest.fixture(scope="module")
    async def fst(homeserver: Homeserver, workdir: Path) -> AsyncIterator[FaultStation]:
        st = FaultStation(homeserver, workdir / dirname, tag)
        await st.setup()
        yield st
        await st.teardown()

    return fst
