"""The bot's device kept in the database (high availability on PostgreSQL).

nio's crypto store stays a local SQLite file the leader works on; its durable copy is one value in the
key/value store (:data:`VAULT_KEY`): nio's store (a consistent copy, through SQLite's backup API), the
device's trust files and ``cross_signing.json``, in a gzip'd tar. :func:`pack` makes it, :func:`unpack`
writes it over a state folder (the database's copy wins over any local file), :func:`fingerprint` tells
cheaply whether anything changed since the last pack. :class:`Vault` ties them to the client and the
key/value store: restored before nio opens the store, saved after login and with each sync token.
"""

from __future__ import annotations

import asyncio
import base64
import io
import os
import sqlite3
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import structlog

from bot.matrix.cross_signing import FILE_NAME as CROSS_SIGNING_FILE
from bot.matrix.station import KeyValue
from bot.util.statedir import write_private

log = structlog.get_logger("matrix.vault")

VAULT_KEY = "matrix.crypto_store"
FORMAT = 1
TRUST_SUFFIXES = (".trusted_devices", ".blacklisted_devices", ".ignored_devices")
JOURNALS = ("-journal", "-wal", "-shm")  # a local leftover of an older copy must never meet the new file

Fingerprint = tuple[Any, ...]


class VaultError(Exception):
    """A saved copy that cannot be unpacked (another device's, an unknown format, a bad archive)."""


def device_files(user_id: str, device_id: str) -> list[str]:
    """The names of the files that make the device: nio's store, its trust files, the cross-signing keys."""
    base = f"{user_id}_{device_id}"
    return [f"{base}.db", *(base + s for s in TRUST_SUFFIXES), CROSS_SIGNING_FILE]


def store_image(path: Path) -> bytes:
    """A consistent copy of the SQLite file at ``path`` (the backup API, then the in-memory image)."""
    src = sqlite3.connect(path, timeout=10)
    mem = sqlite3.connect(":memory:")
    try:
        src.backup(mem)
        return mem.serialize()
    finally:
        mem.close()
        src.close()


def pack(store_path: str | Path, user_id: str, device_id: str) -> bytes:
    """The device's files under ``store_path`` as one compressed archive (the files present)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz", compresslevel=6) as tar:
        for name in device_files(user_id, device_id):
            path = Path(store_path) / name
            if not path.is_file():
                continue
            data = store_image(path) if name.endswith(".db") else path.read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o600
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def unpack(blob: bytes, store_path: str | Path, user_id: str, device_id: str) -> list[str]:
    """Write the archive's files over ``store_path`` (0600, the folder 0700); the device's files the archive
    lacks are removed: afterwards the folder holds exactly the saved device. The names written."""
    allowed = device_files(user_id, device_id)
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
            for m in tar.getmembers():
                f = tar.extractfile(m) if m.isfile() else None
                if m.name not in allowed or f is None:
                    raise VaultError(f"unexpected entry {m.name!r} in the saved crypto store")
                files[m.name] = f.read()
    except (tarfile.TarError, OSError, EOFError) as e:
        raise VaultError(f"the saved crypto store is damaged ({e})") from None
    folder = Path(store_path)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    for name in allowed:
        path = folder / name
        if name.endswith(".db"):
            for j in JOURNALS:
                (folder / (name + j)).unlink(missing_ok=True)
        if name in files:
            write_private(path, files[name])
        else:
            path.unlink(missing_ok=True)
    return sorted(files)


def read_member(blob: bytes, name: str) -> bytes | None:
    """One file of the archive (None when it has none), read without writing anything: what doctor reads."""
    try:
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
            m = tar.getmember(name)
            f = tar.extractfile(m) if m.isfile() else None
            return f.read() if f is not None else None
    except KeyError:
        return None
    except (tarfile.TarError, OSError, EOFError) as e:
        raise VaultError(f"the saved crypto store is damaged ({e})") from None


def fingerprint(store_path: str | Path, user_id: str, device_id: str, changes: Any = None) -> Fingerprint:
    """What changes when the device's files do: ``changes`` (the open store's ``total_changes``) and each
    file's size and mtime. Cheap: a few stat calls."""
    stats: list[tuple[str, tuple[int, int] | None]] = []
    for name in device_files(user_id, device_id):
        try:
            st = os.stat(Path(store_path) / name)
        except FileNotFoundError:
            stats.append((name, None))
            continue
        stats.append((name, (st.st_size, st.st_mtime_ns)))
    return (device_id, changes, tuple(stats))


def entry(user_id: str, device_id: str, blob: bytes) -> dict[str, Any]:
    """The key/value value of a packed device (JSON: the archive in base64)."""
    return {"format": FORMAT, "user_id": user_id, "device_id": device_id,
            "archive": base64.b64encode(blob).decode("ascii")}


def archive_of(saved: Mapping[str, Any], user_id: str, device_id: str) -> bytes:
    """The archive of a saved value for this device; VaultError when it is another device's or unreadable."""
    if saved.get("format") != FORMAT:
        raise VaultError(f"the saved crypto store has an unknown format ({saved.get('format')!r})")
    if saved.get("user_id") != user_id or saved.get("device_id") != device_id:
        raise VaultError(f"the saved crypto store is {saved.get('user_id')}'s device {saved.get('device_id')}, "
                         f"not {user_id}'s {device_id}")
    try:
        return base64.b64decode(str(saved.get("archive", "")), validate=True)
    except ValueError as e:
        raise VaultError(f"the saved crypto store is damaged ({e})") from None


class Vault:
    """The durable copy of one client's device in the key/value store: restored, and saved when changed."""

    def __init__(self, client: Any, store_path: str, kv: KeyValue) -> None:
        self.client = client  # nio's AsyncClient: its user, device and open store
        self.store_path = store_path
        self.kv = kv
        self.saved: Fingerprint | None = None  # what the last save (or restore) left in the database

    def _now(self) -> Fingerprint | None:
        c = self.client
        if c.store is None or not c.user_id or not c.device_id:
            return None
        changes = c.store.database.connection().total_changes  # nio's one connection (peewee, this thread)
        return (id(c.store), *fingerprint(self.store_path, c.user_id, c.device_id, changes))

    async def write(self, values: Mapping[str, Any]) -> None:
        """``values`` and, when it changed since the last save, the device, in one transaction."""
        now, c = self._now(), self.client
        if now is None or now == self.saved:
            if values:
                await self.kv.set_many_json(values)
            return
        blob = await asyncio.to_thread(pack, self.store_path, c.user_id, c.device_id)
        await self.kv.set_many_json({**values, VAULT_KEY: entry(c.user_id, c.device_id, blob)})
        self.saved = now
        log.debug("crypto_store_saved", device_id=c.device_id)

    async def restore(self, user_id: str, device_id: str) -> bool:
        """Before nio opens the store: the database's copy of the device over the local folder.
        False when the database holds none for it (the local files, if any, are used and saved later)."""
        saved = await self.kv.get_json(VAULT_KEY)
        if not isinstance(saved, dict):
            log.info("crypto_store_not_in_database", device_id=device_id, action="using the local files")
            return False
        try:
            blob = archive_of(saved, user_id, device_id)
            names = await asyncio.to_thread(unpack, blob, self.store_path, user_id, device_id)
        except VaultError as e:
            log.warning("crypto_store_not_restored", device_id=device_id, reason=str(e))
            return False
        log.info("crypto_store_restored", device_id=device_id, files=len(names), size=len(blob))
        return True
