"""The device kept in the database (bot/matrix/vault.py): a real nio crypto store packed and unpacked
(the same Olm account, trust and cross-signing keys come back), nothing packed when nothing changed, the
database's copy winning over a newer local file, and several key/value entries in one transaction."""

from __future__ import annotations

import asyncio
import io
import os
import stat
import tarfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from nio import AsyncClient, AsyncClientConfig
from nio.crypto import OlmDevice

from bot.inbox.store import Inbox
from bot.matrix.store import STORE
from bot.matrix.sync import SYNC_KEY, Syncer
from bot.matrix.vault import VAULT_KEY, Vault, VaultError, archive_of, device_files, entry, pack, unpack
from tests.support.fake_facade import MemoryKV

USER, DEVICE = "@bot:hs", "BOTDEV"


def client(store: Path, device: str = DEVICE) -> AsyncClient:
    """A real nio client whose crypto store (our ``Store``) is open for ``device``."""
    store.mkdir(parents=True, exist_ok=True)
    c = AsyncClient("http://127.0.0.1:9", USER, store_path=str(store),
                    config=AsyncClientConfig(encryption_enabled=True, store=STORE, store_sync_tokens=False))
    c.restore_login(USER, device, "token")
    assert c.olm is not None
    return c


def keys(c: AsyncClient) -> dict[str, str]:
    assert c.olm is not None
    return dict(c.olm.account.identity_keys)


def alice() -> OlmDevice:
    return OlmDevice("@alice:hs", "ALICEDEV", {"ed25519": "alice-ed", "curve25519": "alice-cu"})


async def test_pack_and_unpack_bring_back_the_same_device(tmp_path: Path) -> None:
    a = client(tmp_path / "a")
    a.store.save_device_keys({"@alice:hs": {"ALICEDEV": alice()}})
    a.store.verify_device(alice())
    (tmp_path / "a" / "cross_signing.json").write_text('{"master": "m"}')
    blob = pack(tmp_path / "a", USER, DEVICE)
    assert 0 < len(blob) < 20_000  # gzip'd: a fresh store is ~120 kB of mostly empty pages
    (tmp_path / "b").mkdir(mode=0o755)
    names = unpack(blob, tmp_path / "b", USER, DEVICE)
    assert set(names) == {f"{USER}_{DEVICE}.db", f"{USER}_{DEVICE}.trusted_devices",
                          f"{USER}_{DEVICE}.blacklisted_devices", f"{USER}_{DEVICE}.ignored_devices",
                          "cross_signing.json"}
    assert stat.S_IMODE(os.stat(tmp_path / "b").st_mode) == 0o700
    assert all(stat.S_IMODE(os.stat(tmp_path / "b" / n).st_mode) == 0o600 for n in names)
    b = client(tmp_path / "b")
    assert keys(b) == keys(a)  # the same Olm account
    assert b.olm is not None and b.olm.device_store["@alice:hs"]["ALICEDEV"].ed25519 == "alice-ed"
    assert b.store.is_device_verified(alice())
    assert (tmp_path / "b" / "cross_signing.json").read_text() == '{"master": "m"}'


async def test_the_saved_copy_wins_over_newer_local_files(tmp_path: Path) -> None:
    a = client(tmp_path / "a")
    blob = pack(tmp_path / "a", USER, DEVICE)
    local = client(tmp_path / "b")  # the same device id, another (newer) account in the local folder
    local.store.verify_device(alice())
    local_keys = keys(local)
    await local.close()
    folder = tmp_path / "b"
    (folder / f"{USER}_{DEVICE}.db-journal").write_bytes(b"a stale journal of the local copy")
    (folder / "cross_signing.json").write_text("{}")
    unpack(blob, folder, USER, DEVICE)
    assert not (folder / f"{USER}_{DEVICE}.db-journal").exists()
    assert not (folder / "cross_signing.json").exists()  # not in the saved copy: the database is the truth
    b = client(folder)
    assert keys(b) == keys(a) != local_keys
    assert not b.store.is_device_verified(alice())


def test_another_devices_copy_or_a_strange_archive_is_refused(tmp_path: Path) -> None:
    client(tmp_path / "a")
    saved = entry(USER, DEVICE, pack(tmp_path / "a", USER, DEVICE))
    with pytest.raises(VaultError, match="not @bot:hs's OTHER"):
        archive_of(saved, USER, "OTHER")
    with pytest.raises(VaultError, match="damaged"):
        unpack(b"not a tar", tmp_path / "c", USER, DEVICE)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("../escape")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(VaultError, match="unexpected entry"):
        unpack(buf.getvalue(), tmp_path / "c", USER, DEVICE)
    assert not (tmp_path / "escape").exists()
    assert device_files(USER, DEVICE)[0] == f"{USER}_{DEVICE}.db"


async def test_nothing_is_packed_until_the_device_changes(tmp_path: Path) -> None:
    kv = Writes()
    c = client(tmp_path / "a")
    vault = Vault(c, str(tmp_path / "a"), kv)
    await vault.write({})
    first = kv.data[VAULT_KEY]
    assert first["device_id"] == DEVICE
    await vault.write({})
    assert len(kv.writes) == 1  # unchanged: no pack, nothing to write
    c.store.save_device_keys({"@alice:hs": {"ALICEDEV": alice()}})  # a write to nio's store
    await vault.write({})
    assert len(kv.writes) == 2 and kv.writes[-1][VAULT_KEY]["archive"] != first["archive"]
    await vault.write({})
    assert len(kv.writes) == 2
    (tmp_path / "a" / "cross_signing.json").write_text("{}")  # a file of the device appears
    await vault.write({})
    assert len(kv.writes) == 3


async def test_restore_unpacks_the_saved_device_before_nio_opens_it(tmp_path: Path) -> None:
    kv = MemoryKV()
    a = client(tmp_path / "a")
    await Vault(a, str(tmp_path / "a"), kv).write({})
    fresh = AsyncClient("http://127.0.0.1:9", USER, store_path=str(tmp_path / "new"),
                        config=AsyncClientConfig(encryption_enabled=True, store=STORE, store_sync_tokens=False))
    vault = Vault(fresh, str(tmp_path / "new"), kv)
    assert not await vault.restore(USER, "OTHER")  # another device's copy: left alone
    assert await vault.restore(USER, DEVICE)
    fresh.restore_login(USER, DEVICE, "token")
    assert keys(fresh) == keys(a)
    assert not await Vault(fresh, str(tmp_path / "x"), MemoryKV()).restore(USER, DEVICE)  # none saved


async def test_several_values_in_one_transaction(inbox: Inbox) -> None:
    await inbox.set_many_json({"matrix.next_batch": "s1", VAULT_KEY: {"archive": "QQ=="}})
    assert await inbox.get_json("matrix.next_batch") == "s1"
    assert await inbox.get_json(VAULT_KEY) == {"archive": "QQ=="}

    class Boom(Exception):
        pass

    values: dict[str, Any] = {"matrix.next_batch": "s2"}
    with pytest.raises(Boom):
        async with inbox.database.transaction():
            await inbox.set_many_json(values)  # joins the outer transaction, which then fails
            raise Boom
    assert await inbox.get_json("matrix.next_batch") == "s1"


class Writes(MemoryKV):
    """A key/value store that records each write (one dict per transaction)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[dict[str, Any]] = []

    async def set_json(self, k: str, v: Any) -> None:
        self.writes.append({k: v})
        await super().set_json(k, v)

    async def set_many_json(self, values: dict[str, Any]) -> None:
        self.writes.append(dict(values))
        for k, v in values.items():
            await super().set_json(k, v)


async def test_the_sync_token_goes_with_the_changed_device_in_one_write(tmp_path: Path) -> None:
    kv = Writes()
    c = client(tmp_path / "a")
    syncer = Syncer(SimpleNamespace(kv=kv), [], vault=Vault(c, str(tmp_path / "a"), kv))  # type: ignore[arg-type]
    assert await syncer._save_token("s1", asyncio.Event())
    assert [sorted(w) for w in kv.writes] == [sorted([SYNC_KEY, VAULT_KEY])]  # one transaction
    assert await syncer._save_token("s2", asyncio.Event())
    assert kv.writes[-1] == {SYNC_KEY: "s2"}  # nothing changed: the token alone
    c.store.save_device_keys({"@alice:hs": {"ALICEDEV": alice()}})  # e.g. a to-device message handled
    assert await syncer._save_token("s3", asyncio.Event())
    assert kv.writes[-1][SYNC_KEY] == "s3" and kv.writes[-1][VAULT_KEY]["device_id"] == DEVICE
