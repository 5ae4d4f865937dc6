"""Encrypted station rooms for the tests: a person on an encrypting matrix-nio device (vodozemac),
and a station (its own bot account, room, state dir, API port and daemon) whose room is encrypted."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

import vodozemac
from nio import AsyncClient, AsyncClientConfig, MegolmEvent, SyncResponse
from nio.event_builders import ToDeviceMessage

from bot.demo.homeserver import Homeserver, http
from tests.support.human import Human, content
from tests.support.station import BOT_PASSWORD, Station, own_suffix

MEGOLM = "m.megolm.v1.aes-sha2"


class E2EHuman(Human):
    """A person whose one device encrypts and decrypts (matrix-nio with its e2e extra).

    ``events`` holds what the person reads: decrypted events shaped as plaintext, and the
    ``m.room.encrypted`` wrapper of anything this device cannot decrypt (also in ``undecryptable``).
    """

    def __init__(self, hs: Homeserver, localpart: str, store: Path) -> None:
        super().__init__(hs, localpart)  # registers; its plain client is replaced below
        self.hs = hs
        self.device_id = self.client.device_id or ""
        store.mkdir(parents=True, exist_ok=True)
        self.client = AsyncClient(
            hs.url,
            self.user_id,
            device_id=self.device_id,
            store_path=str(store),
            config=AsyncClientConfig(encryption_enabled=True, store_sync_tokens=False),
        )
        self.client.restore_login(self.user_id, self.device_id, self.token)
        assert self.client.olm is not None, "matrix-nio's e2e extra is not installed"
        self.undecryptable: list[dict[str, Any]] = []
        self.to_device: list[dict[str, Any]] = []
        self._later: list[MegolmEvent] = []

    @property
    def ed25519(self) -> str:
        assert self.client.olm is not None
        return str(self.client.olm.account.identity_keys["ed25519"])

    @property
    def curve25519(self) -> str:
        assert self.client.olm is not None
        return str(self.client.olm.account.identity_keys["curve25519"])

    async def housekeeping(self) -> None:
        c = self.client
        if c.outgoing_to_device_messages:
            await c.send_to_device_messages()
        if c.should_upload_keys:
            await c.keys_upload()
        if c.should_query_keys:
            await c.keys_query()
        if c.should_claim_keys:
            await c.keys_claim(c.get_users_for_key_claiming())

    async def start(self, room_id: str, follow: bool = True) -> None:
        """Always follows (``follow`` is ignored): the device must receive its room keys as they come."""
        self.room_id = room_id
        await self.housekeeping()
        r = await self.client.sync(timeout=0, full_state=True)
        assert isinstance(r, SyncResponse), r
        self._since = r.next_batch
        await self.housekeeping()
        self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            try:
                r = await self.client.sync(timeout=3000, since=self._since)
            except asyncio.CancelledError:
                raise
            except Exception:
                await asyncio.sleep(0.2)
                continue
            if not isinstance(r, SyncResponse):
                await asyncio.sleep(0.2)
                continue
            self._since = r.next_batch
            self.to_device.extend(ev.source for ev in r.to_device_events if isinstance(ev.source, dict))
            if r.to_device_events:  # maybe a room key for something this device could not read yet
                self._retry_later()
            room = r.rooms.join.get(self.room_id)
            if room:
                for ev in room.timeline.events:
                    if isinstance(ev, MegolmEvent):
                        self.undecryptable.append(ev.source)
                        self._later.append(ev)
                    self.events.append(ev.source)
            try:
                await self.housekeeping()
            except Exception:
                pass

    def _retry_later(self) -> None:
        still = []
        for ev in self._later:
            try:
                dec = self.client.decrypt_event(ev)
            except Exception:
                still.append(ev)
                continue
            self.events.append(dec.source)
        self._later = still

    async def wait_devices(self, user_id: str, timeout: float = 30) -> list[Any]:
        """Wait until this device knows ``user_id``'s device keys."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            devs = list(self.client.device_store.active_user_devices(user_id))
            if devs:
                return devs
            self.client.olm.users_for_key_query.add(user_id)  # type: ignore[union-attr]
            await asyncio.sleep(0.2)
        raise AssertionError(f"{self.user_id} never saw a device of {user_id}")

    # -- sending: encrypted like Element (reactions too), the relation in the clear only --
    async def send(self, c: dict[str, Any], etype: str = "m.room.message") -> str:
        cl = self.client
        olm = cl.olm
        assert olm is not None
        room = cl.rooms[self.room_id]
        if not room.members_synced:
            await cl.joined_members(self.room_id)
        if cl.should_query_keys:
            await cl.keys_query()
        sess = olm.outbound_group_sessions.get(self.room_id)
        if sess is not None and sess.shared:
            covered = sess.users_shared_with | sess.users_ignored
            for user in list(room.users):
                for dev in olm.device_store.active_user_devices(user):
                    if (user, dev.id) not in covered and dev.id != self.device_id:
                        cl.invalidate_outbound_session(self.room_id)  # a new device: a new session for all
                        break
        if olm.should_share_group_session(self.room_id):
            await cl.share_group_session(self.room_id, ignore_unverified_devices=True)
        # Like Element: the relation goes only into the cleartext part, not into the ciphertext.
        inner = {k: v for k, v in c.items() if k != "m.relates_to"}
        etype2, enc = cl.encrypt(self.room_id, etype, inner)
        if "m.relates_to" in c:
            enc["m.relates_to"] = c["m.relates_to"]
        return await self.put_event(etype2, enc)

    async def put_event(self, etype: str, body: dict[str, Any]) -> str:
        """Send ``body`` as is (no encryption by nio), through the plain client-server API."""
        url = (
            f"{self.hs.url}/_matrix/client/v3/rooms/{urllib.parse.quote(self.room_id)}/send/"
            f"{urllib.parse.quote(etype)}/{uuid.uuid4().hex}"
        )
        r = await asyncio.to_thread(http, "PUT", url, body, self.token)
        return str(r["event_id"])

    async def send_undecryptable(
        self, c: dict[str, Any], etype: str = "m.room.message"
    ) -> tuple[str, str, str]:
        """An encrypted event whose Megolm session nobody was given: (event_id, session_id, exported key).

        Like a message whose room key never reached the bot. The relation stays in the clear.
        """
        gs = vodozemac.GroupSession()
        exported = vodozemac.InboundGroupSession(gs.session_key).export_at(0)
        assert exported is not None
        payload = json.dumps({"type": etype, "content": c, "room_id": self.room_id})
        body: dict[str, Any] = {
            "algorithm": MEGOLM,
            "sender_key": self.curve25519,
            "ciphertext": gs.encrypt(payload.encode()).to_base64(),
            "session_id": gs.session_id,
            "device_id": self.device_id,
        }
        if "m.relates_to" in c:
            body["m.relates_to"] = c["m.relates_to"]
        event_id = await self.put_event("m.room.encrypted", body)
        return event_id, gs.session_id, exported.to_base64()

    async def forward_key(self, user_id: str, device_id: str, session_id: str, exported: str) -> None:
        """Send the session (as ``m.forwarded_room_key``, Olm-encrypted) to one device, as Element
        answers a key request for a session it created."""
        cl = self.client
        olm = cl.olm
        assert olm is not None
        dev = olm.device_store[user_id][device_id]
        session = olm.session_store.get(dev.curve25519)
        if session is None:
            await cl.keys_claim({user_id: [device_id]})
            session = olm.session_store.get(dev.curve25519)
        assert session is not None, "no Olm session with the bot's device"
        key_content = {
            "algorithm": MEGOLM,
            "room_id": self.room_id,
            "sender_key": self.curve25519,
            "session_id": session_id,
            "session_key": exported,
            "sender_claimed_ed25519_key": self.ed25519,
            "forwarding_curve25519_key_chain": [],
        }
        olm_dict = olm._olm_encrypt(session, dev, "m.forwarded_room_key", key_content)
        r = await cl.to_device(ToDeviceMessage("m.room.encrypted", user_id, device_id, olm_dict))
        assert not hasattr(r, "status_code") or not r.status_code, r

    def key_requests(self, session_id: str, sender: str) -> list[dict[str, Any]]:
        """The room key requests for ``session_id`` from ``sender`` this device received."""
        return [
            d
            for d in self.to_device
            if d.get("type") == "m.room_key_request"
            and d.get("sender") == sender
            and content(d).get("action") == "request"
            and content(d).get("body", {}).get("session_id") == session_id
        ]


class E2EStation(Station):
    """A station of its own in an encrypted room: bot ``permbot{tag}``, alice and bob on encrypting
    devices (both answerers), carol on a plain client (she sees what goes over the wire)."""

    def __init__(
        self, hs: Homeserver, workdir: Path, tag: str, *, encryption: bool = True, matrix_extra: str = "",
        trust: str = "tofu",
    ) -> None:
        super().__init__(hs, workdir)
        self.tag = tag
        self.encryption = encryption
        self.matrix_extra = matrix_extra
        self.trust = trust  # its humans are matrix-nio devices, which do not cross-sign: tofu unless asked

    def make_people_and_room(self) -> None:
        self.tag = t = own_suffix(self.tag)  # another station of this worker may have taken the accounts' names
        self.bot_id = self.hs.register(f"permbot{t}", BOT_PASSWORD)["user_id"]
        self.alice = E2EHuman(self.hs, f"alice{t}", self.dir / "alice-store")
        self.bob = E2EHuman(self.hs, f"bob{t}", self.dir / "bob-store")
        self.carol = Human(self.hs, f"carol{t}")
        self.room_id = self.hs.create_room(
            self.alice.token, invite=[self.bot_id, self.bob.user_id, self.carol.user_id], encrypted=True
        )

    async def setup(self) -> None:
        await super().setup()
        if self.encryption:
            for h in (self.alice, self.bob):
                await h.wait_devices(self.bot_id)

    def config_text(self, **matrix: str) -> str:
        lines = [f"encryption = {'true' if self.encryption else 'false'}", self.matrix_extra]
        matrix.setdefault("trust", f'"{self.trust}"')
        lines += [f"{k} = {v}" for k, v in matrix.items()]
        text = super().config_text().replace("sync_timeout = 5.0\n", "sync_timeout = 5.0\n" + "\n".join(lines) + "\n")
        return text.replace(
            f'users = ["{self.alice.user_id}"]', f'users = ["{self.alice.user_id}", "{self.bob.user_id}"]'
        )

    def kv(self, key: str) -> Any:
        """A value the daemon keeps in its inbox's key/value table (read while it runs)."""
        db = sqlite3.connect(f"file:{self.state_dir / 'inbox.sqlite3'}?mode=ro", uri=True, timeout=10)
        try:
            row = db.execute("SELECT v FROM kv WHERE k=?", (key,)).fetchone()
        finally:
            db.close()
        return json.loads(row[0]) if row else None

    def bot_devices(self) -> list[str]:
        """The bot account's devices, as the homeserver lists them."""
        token = self.kv("matrix.session")["access_token"]
        r = http("GET", self.hs.url + "/_matrix/client/v3/devices", token=token)
        return sorted(d["device_id"] for d in r["devices"])

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
