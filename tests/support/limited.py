"""A Synapse as most homeservers run it: the default message limit (``rc_message``: 0.2 events a second after
a burst of 10) for every account, the bot's too. Only for the tests and the bench of that limit; the session's
Synapse stays unlimited."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from bot.demo.homeserver import Homeserver
from tests.support.station import Station
from tests.support.synapse_template import copy

RC_MESSAGE = {"per_second": 0.2, "burst_count": 10}  # Synapse's default
LIMITED_SYNAPSE = {"bcrypt_rounds": 4, "rc_message": RC_MESSAGE}
FLOOR_BURST, FLOOR_EVERY = 10, 1 / RC_MESSAGE["per_second"]  # the prompts-only floor: 10 at once, then one per 5 s


def floor(k: int) -> float:
    """Seconds after a burst's start the k-th (1-based) of its prompts can be in the room at the earliest."""
    return max(0, k - FLOOR_BURST) * FLOOR_EVERY


@asynccontextmanager
async def limited_station(workdir: Path, template: Path | None = None) -> AsyncIterator[Station]:
    """A limited Synapse of its own (a copy of ``template``, tests/support/synapse_template.py, when given) and a
    station (bot, alice, bob, carol, room, daemon) on it."""
    where = workdir / "synapse"
    hs = copy(template, where, LIMITED_SYNAPSE) if template else Homeserver(where, overrides=LIMITED_SYNAPSE)
    await asyncio.to_thread(hs.start)
    st = Station(hs, workdir / "station")
    try:
        await st.setup()
        yield st
    finally:
        await st.teardown()
        hs.stop()
