"""The bot's own cross-signing identity: kept under ``[state] path``, published once, and
every device of the bot signed with it (matrix-nio 0.26 has no cross-signing).

On start (``ensure``): the account has no identity -> make one, save it (0600), upload it
(``/keys/device_signing/upload``; the password when the server asks for it); the
account's identity is the saved one -> go on; it is not in the state folder (a fresh
folder, or made elsewhere) -> import it from secret storage with ``matrix.recovery_key``,
or stop with one line saying what happened and what to do. The identity is kept in
secret storage too (identity_backup.py: a recovery key written once to the state folder).
Then the bot's device is signed with the self-signing key when it is not yet.
Nothing is posted before this has succeeded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import structlog

from bot.matrix import identity_backup
from bot.matrix.errors import MatrixFatal
from bot.matrix.secret_storage import ALGORITHM, decode_recovery_key, decrypt, key_fits
from bot.matrix.signing import USAGES, Identity, SigningKey, device_signed_by, key_of, unb64
from bot.util.statedir import write_private

log = structlog.get_logger("matrix.cross_signing")

FILE_NAME = "cross_signing.json"


class HttpError(Exception):
    """A Matrix error answer: ``status``, ``body`` (the JSON error object)."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(f"{status} {body.get('errcode', '')}: {body.get('error', '')}".strip())
        self.status = status
        self.body = body


class Api:
    """The few client-server calls cross-signing needs (nio 0.26 has none of them)."""

    def __init__(self, homeserver: str, access_token: str) -> None:
        self.base = homeserver.rstrip("/") + "/_matrix/client/v3"
        self.token = access_token

    async def call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self.token}"}
        timeout = aiohttp.ClientTimeout(total=60)
        async with aiohttp.ClientSession(timeout=timeout) as s, s.request(
            method, self.base + path, json=body, headers=headers
        ) as r:
            try:
                data = await r.json(content_type=None)
            except (ValueError, aiohttp.ContentTypeError):
                data = {}
            if not isinstance(data, dict):
                data = {}
            if r.status >= 400:
                raise HttpError(r.status, data)
            return data

    async def query(self, users: list[str]) -> dict[str, Any]:
        """``/keys/query``: device_keys, master_keys, self_signing_keys of ``users``."""
        return await self.call("POST", "/keys/query", {"device_keys": {u: [] for u in users}})

    async def account_data(self, user_id: str, kind: str) -> dict[str, Any] | None:
        try:
            return await self.call("GET", f"/user/{quote(user_id)}/account_data/{quote(kind)}")
        except HttpError as e:
            if e.status == 404:
                return None
            raise


def identity_path(state_path: str | Path) -> Path:
    return Path(state_path).absolute() / FILE_NAME


def load_identity(path: Path) -> Identity | None:
    """The saved identity, None when there is none; MatrixFatal (one line) when the file is damaged."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise MatrixFatal(f"{path}: cannot read the bot's cross-signing keys ({e.strerror})") from None
    try:
        return Identity.from_json(json.loads(text))
    except ValueError as e:
        raise MatrixFatal(f"{path}: the bot's cross-signing keys are damaged ({e}); restore the file from a copy, "
                          "or run `permission-bot e2ee reset-identity` to make a new identity") from None


def save_identity(path: Path, ident: Identity) -> None:
    """Write the private keys, readable by the bot's user only (atomically, 0600)."""
    write_private(path, json.dumps(ident.to_json()))


async def upload_identity(api: Api, user_id: str, ident: Identity, password: str | None) -> None:
    """Publish the three public keys; a server that wants auth gets ``m.login.password``."""
    body: dict[str, Any] = ident.public_objects(user_id)
    while True:
        try:
            await api.call("POST", "/keys/device_signing/upload", body)
            return
        except HttpError as e:
            if "auth" in body or e.status != 401 or "flows" not in e.body:
                raise MatrixFatal(f"matrix: the homeserver refused the bot's cross-signing keys ({e})") from None
            session = e.body.get("session")
        if not password:
            raise MatrixFatal("matrix.password: the homeserver wants the password to publish the bot's cross-signing "
                              "keys; set matrix.password (or env PERMISSION_BOT_MATRIX_PASSWORD)")
        auth = {"type": "m.login.password", "identifier": {"type": "m.id.user", "user": user_id}, "password": password}
        body = {**body, "auth": {**auth, "session": session} if session else auth}


async def sign_device(api: Api, user_id: str, device_keys: Mapping[str, Any], ident: Identity) -> None:
    """Sign one of the bot's devices with the self-signing key; MatrixFatal on any failure."""
    signed = ident.self_signing.sign({k: v for k, v in device_keys.items() if k != "unsigned"}, user_id)
    device_id = str(device_keys.get("device_id"))
    try:
        r = await api.call("POST", "/keys/signatures/upload", {user_id: {device_id: signed}})
    except HttpError as e:
        raise MatrixFatal(f"matrix: the homeserver refused the signature of the bot's device ({e})") from None
    if r.get("failures"):
        raise MatrixFatal(f"matrix: the homeserver refused the signature of the bot's device: {r['failures']}")
    log.info("device_cross_signed", device_id=device_id)


async def ensure(
    api: Api, user_id: str, device_id: str, state_path: str | Path, *,
    password: str | None, recovery_key: str | None,
) -> None:
    """Make sure the account has the bot's identity published and this device signed with it.
    Raises MatrixFatal with one line saying what to do."""
    path = identity_path(state_path)
    local = load_identity(path)
    try:
        q = await api.query([user_id])
    except (HttpError, aiohttp.ClientError, TimeoutError) as e:
        raise MatrixFatal(f"matrix: cannot read the bot's published keys ({e})") from None
    master = key_of((q.get("master_keys") or {}).get(user_id))  # the published keys (None where missing)
    ssk = key_of((q.get("self_signing_keys") or {}).get(user_id))
    if master is None:
        made, local = local is None, local or Identity.generate()
        save_identity(path, local)
        await upload_identity(api, user_id, local, password)
        log.info("cross_signing_published", master=local.master.public, made=made)
    elif local is None or local.master.public != master or local.self_signing.public != ssk:
        if not recovery_key:
            raise MatrixFatal(await _not_here(api, user_id, path))
        local = await import_identity(api, user_id, recovery_key, master, ssk)
        save_identity(path, local)
        log.info("cross_signing_imported", master=local.master.public)
    try:  # the keys in secret storage too: a fresh state folder recovers them with the recovery key
        await identity_backup.ensure_stored(api, user_id, local, state_path, recovery_key)
    except (HttpError, aiohttp.ClientError, TimeoutError) as e:
        log.warning("cross_signing_not_stored", error=str(e),
                    hint="the identity is only in cross_signing.json: back it up with the state folder")
    dev = (q.get("device_keys") or {}).get(user_id, {}).get(device_id)
    if not isinstance(dev, Mapping):
        raise MatrixFatal(f"matrix: the homeserver has no keys for the bot's device {device_id}; "
                          "delete state/ to log in as a new device")
    if not device_signed_by(dev, user_id, local.self_signing.public):
        await sign_device(api, user_id, dev, local)


async def _not_here(api: Api, user_id: str, path: Path) -> str:
    """The one line for an account whose identity is not in the state folder: what happened, what fixes it."""
    fix = ("without that key, `permission-bot e2ee reset-identity --config <your config>` makes a new identity "
           "(people who verified the bot verify it again)")
    try:
        ours = await identity_backup.stored_by_bot(api, user_id)
    except (HttpError, aiohttp.ClientError, TimeoutError):
        ours = False
    if ours:
        return (f"matrix: {user_id} has the cross-signing identity this bot made, but its keys are not in {path} "
                "(a new or moved state folder?); set matrix.recovery_key (or env PERMISSION_BOT_MATRIX_RECOVERY_KEY) "
                f"to the key the bot wrote to {identity_backup.KEY_FILE} at its first start and it takes its "
                f"identity back from secret storage; {fix}")
    return (f"matrix: {user_id} already has a cross-signing identity that is not in {path} (made elsewhere, "
            "e.g. in Element, or by this bot before its state folder was replaced); set matrix.recovery_key "
            "(or env PERMISSION_BOT_MATRIX_RECOVERY_KEY) to import it from secret storage; " + fix)


async def import_identity(api: Api, user_id: str, recovery_key: str, master: str | None, ssk: str | None) -> Identity:
    """The account's cross-signing keys from secret storage; MatrixFatal (one line) when they cannot be had."""
    where = "matrix.recovery_key"
    try:
        key = decode_recovery_key(recovery_key)
    except ValueError as e:
        raise MatrixFatal(f"{where}: {e}") from None
    try:
        default = await api.account_data(user_id, "m.secret_storage.default_key")
        key_id = str((default or {}).get("key") or "")
        desc = await api.account_data(user_id, f"m.secret_storage.key.{key_id}") if key_id else None
        if not desc or desc.get("algorithm") != ALGORITHM:
            raise MatrixFatal(f"{where}: {user_id} has no secret storage to import from; "
                              "run `permission-bot e2ee reset-identity` to make a new identity")
        if not key_fits(key, desc):
            raise MatrixFatal(f"{where}: this recovery key does not open {user_id}'s secret storage")
        seeds = []
        for usage in USAGES:
            name = f"m.cross_signing.{usage}"
            enc = ((await api.account_data(user_id, name) or {}).get("encrypted") or {}).get(key_id)
            if not isinstance(enc, Mapping):
                raise MatrixFatal(f"{where}: {user_id}'s secret storage holds no {name} key")
            seeds.append(SigningKey(unb64(decrypt(key, name, enc).decode())))
    except HttpError as e:
        raise MatrixFatal(f"{where}: cannot read {user_id}'s secret storage ({e})") from None
    except (ValueError, KeyError, UnicodeDecodeError) as e:
        raise MatrixFatal(f"{where}: {user_id}'s secret storage holds damaged keys ({e})") from None
    ident = Identity(*seeds)
    if ident.master.public != master or ident.self_signing.public != ssk:
        raise MatrixFatal(f"{where}: the keys in secret storage are not {user_id}'s published identity")
    return ident
