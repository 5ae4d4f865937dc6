"""Two daemons on one PostgreSQL database (issue 27): the first one's station, a peer daemon for the same
account and room, and waiting for a role in /healthz."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from tests.support.station import OwnStation, Station


def without_e2ee(text: str) -> str:
    """Encryption off: the take-over tests run faster in a plain room (tests/test_ha_e2ee_e2e.py has it on)."""
    return text.replace("sync_timeout = 5.0", "sync_timeout = 5.0\nencryption = false")


class HaStation(OwnStation):
    """The first daemon, with accounts of its own (``...ha``)."""

    suffix = "ha"

    def config_text(self) -> str:
        return without_e2ee(super().config_text())


class Peer(Station):
    """``source``'s config with its own API port and state folder."""

    def __init__(self, source: Station, workdir: Path) -> None:
        super().__init__(source.hs, workdir)
        self.source = source

    def config_text(self) -> str:
        src = self.source
        return (src.config_text().replace(f'path = "{src.state_dir}"', f'path = "{self.state_dir}"')
                .replace(f'listen = "127.0.0.1:{src.api_port}"', f'listen = "127.0.0.1:{self.api_port}"'))


def peer_of(st: Station, workdir: Path) -> Station:
    """A second daemon for the same bot account, room and database (its own API port and state folder)."""
    peer = Peer(st, workdir)
    peer.bot_id, peer.room_id = st.bot_id, st.room_id
    peer.alice, peer.bob, peer.carol = st.alice, st.bob, st.carol
    peer.env = dict(st.env)
    peer.write_config()
    return peer


async def role_of(st: Station) -> str | None:
    try:
        code, body = await st.ahttp("GET", "/healthz", timeout=5)
    except OSError:
        return None
    return body.get("role") if code == 200 else None


async def until_role(st: Station, role: str, timeout: float = 60) -> float:
    """Seconds until ``st`` answers /healthz with ``role`` (fails after ``timeout``: only a guard)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if st.daemon is not None and st.daemon.poll() is not None:
            raise AssertionError(f"daemon exited {st.daemon.returncode}: {st.log_path.read_text()[-1500:]}")
        if await role_of(st) == role:
            return time.monotonic() - t0
        await asyncio.sleep(0.1)
    raise AssertionError(f"never {role}: {st.log_path.read_text()[-1500:]}")


async def until_logged(st: Station, event: str, since: int, timeout: float = 60) -> str:
    """The daemon's log after byte ``since`` once it holds ``event`` (fails after ``timeout``: only a guard)."""
    deadline = time.monotonic() + timeout
    while True:
        text = st.log_path.read_bytes()[since:].decode(errors="replace")
        if f"event='{event}'" in text or f'"event": "{event}"' in text:
            return text
        assert st.daemon is not None and st.daemon.poll() is None, f"daemon exited: {text[-1500:]}"
        assert time.monotonic() < deadline, f"never logged {event}: {text[-1500:]}"
        await asyncio.sleep(0.1)
