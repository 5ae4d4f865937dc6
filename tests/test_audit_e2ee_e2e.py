"""The ledger's checkpoints in an encrypted station room, end to end: the checkpoint is a state event, never
encrypted and never a message, and ``audit verify --against-room`` reads it with the saved session alone,
while the daemon runs, without a new device, a sync or the bot's crypto store; a database edited by hand
is caught there as in a plain room."""

from __future__ import annotations

import asyncio
import sqlite3
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.demo.homeserver import Homeserver, http
from bot.events.checkpoints import CHECKPOINT_TYPE
from bot.events.ledger import CHECKPOINT_KEY
from tests.support.audit_tamper import (
    assert_tampering_caught,
    checkpoints_agree,
    grant_checkpoints,
    is_checkpoint,
    verify_edited,
)
from tests.support.e2e_human import E2EStation
from tests.support.human import content
from tests.support.station import request_body

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
async def st(homeserver: Homeserver, workdir: Path) -> AsyncIterator[E2EStation]:
    s = E2EStation(homeserver, workdir / "audit-e2ee", "aude")
    s.env = {"PERMISSION_BOT_CHECKPOINT_PERIOD": "2", "PERMISSION_BOT_CHECKPOINT_DELAY": "0.4"}
    await s.setup()
    grant_checkpoints(s.hs, s.alice.token, s.room_id)  # before the first entry
    yield s
    await s.teardown()


async def _settle(st: E2EStation, sid: str, n: int) -> None:
    for i in range(n):
        rec = await st.post(request_body(f"{sid}{i}"))
        code, _ = await st.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "approve"})
        assert code == 200


async def _checkpoint(st: E2EStation, seq: int) -> dict[str, Any]:
    ev = await st.alice.wait(lambda e: is_checkpoint(e, st.bot_id, seq), 30)
    assert ev, f"no checkpoint of seq {seq} in alice's timeline"
    return ev


async def test_checkpoints_in_an_encrypted_room_are_read_and_tampering_caught(
    st: E2EStation, sid: str, tmp_path: Path
) -> None:
    await _settle(st, sid, 6)
    out = await asyncio.to_thread(st.cli, "audit", "export", "--config", str(st.config_path))
    head = int(out.stdout.splitlines()[-1].split('"seq":')[1].split(",")[0])
    ev = await _checkpoint(st, head)
    assert content(ev)["seq"] == head
    room, eid = urllib.parse.quote(st.room_id), urllib.parse.quote(ev["event_id"])
    wire = http("GET", f"{st.hs.url}/_matrix/client/v3/rooms/{room}/event/{eid}", token=st.carol.token)
    assert wire["type"] == CHECKPOINT_TYPE and wire["content"]["seq"] == head  # on the wire: a plain state event
    assert not st.alice.find(lambda e: e.get("sender") == st.bot_id and CHECKPOINT_KEY in content(e))  # no message
    devices = st.bot_devices()
    ok = await asyncio.to_thread(st.cli, "audit", "verify", "--against-room", "--config", str(st.config_path))
    assert ok.returncode == 0 and checkpoints_agree(ok.stdout), ok.stderr
    assert "; 0 checkpoints" not in ok.stdout
    assert st.bot_devices() == devices  # no device made
    # the daemon was not disturbed: alice's encrypted answer still settles a prompt
    rec = await st.post(request_body(f"{sid}m"))
    prompt = await st.prompt_for(rec["session_id"], human=st.alice)
    assert prompt
    await st.alice.text("1", reply_to=prompt["event_id"])
    assert (await st.record(rec["id"], wait=20))["state"] == "resolved"
    await _checkpoint(st, head + 1)
    await assert_tampering_caught(st, tmp_path, head - 2, head + 1)


async def test_verify_needs_no_crypto_store(st: E2EStation, sid: str, tmp_path: Path) -> None:
    """The copy of the state holds none of the bot's device files: the checkpoints are read all the same."""
    await _settle(st, sid, 1)
    out = await asyncio.to_thread(st.cli, "audit", "export", "--config", str(st.config_path))
    await _checkpoint(st, int(out.stdout.splitlines()[-1].split('"seq":')[1].split(",")[0]))
    device = st.kv("matrix.session")["device_id"]

    def lose(_: sqlite3.Connection) -> None:
        for f in (tmp_path / "lose" / "state").iterdir():
            if f.name.startswith(f"{st.bot_id}_{device}"):
                f.unlink()

    ok = await asyncio.to_thread(verify_edited, st, tmp_path / "lose", lose, "--against-room")
    assert ok.returncode == 0 and checkpoints_agree(ok.stdout), ok.stderr
