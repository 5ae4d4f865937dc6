"""The bot's cross-signing keys in the account's secret storage (SSSS), so that a fresh state folder
(deleted to log in afresh, an empty Docker volume, another working directory) recovers the same identity.

Whenever the account's secret storage does not hold the bot's identity (its first start, or a bot made
before this existed): a recovery key (``matrix.recovery_key`` when set, else a new one, written once to
``<state>/recovery-key.txt``, mode 600) encrypts the three private keys into the account data
``m.cross_signing.{master,self_signing,user_signing}`` under a secret storage key named
``permission-bot``, made the default one. A later start without ``cross_signing.json`` imports them with
``matrix.recovery_key`` (:func:`bot.matrix.cross_signing.import_identity`), as Element's keys are.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

import structlog

from bot.matrix.secret_storage import (
    decode_recovery_key,
    decrypt,
    encode_recovery_key,
    encrypt,
    key_description,
    key_fits,
    new_iv,
)
from bot.matrix.signing import USAGES, Identity, b64, unb64
from bot.util.statedir import write_private


class Api(Protocol):
    """What this needs of :class:`bot.matrix.cross_signing.Api`."""

    async def call(self, method: str, path: str, body: Any = None) -> dict[str, Any]: ...

    async def account_data(self, user_id: str, kind: str) -> dict[str, Any] | None: ...

log = structlog.get_logger("matrix.cross_signing")

KEY_NAME = "permission-bot"
KEY_FILE = "recovery-key.txt"


def key_file(state_path: str | Path) -> Path:
    return Path(state_path).absolute() / KEY_FILE


async def _data(api: Api, user_id: str, kind: str) -> dict[str, Any]:
    return await api.account_data(user_id, kind) or {}


async def _put(api: Api, user_id: str, kind: str, content: dict[str, Any]) -> None:
    await api.call("PUT", f"/user/{quote(user_id)}/account_data/{quote(kind)}", content)


async def stored_by_bot(api: Api, user_id: str) -> bool:
    """Is the account's default secret storage key the one the bot made (its identity is kept there)?"""
    key_id = str((await _data(api, user_id, "m.secret_storage.default_key")).get("key") or "")
    if not key_id:
        return False
    desc = await _data(api, user_id, f"m.secret_storage.key.{key_id}")
    return desc.get("name") == KEY_NAME and bool((await _data(api, user_id, "m.cross_signing.master")).get("encrypted"))


def _known_key(state_path: str | Path, recovery_key: str | None) -> bytes | None:
    """The configured recovery key, else the one the bot wrote into the state folder; None when neither."""
    text = recovery_key
    if not text:
        with contextlib.suppress(OSError):
            text = key_file(state_path).read_text().strip()
    try:
        return decode_recovery_key(text) if text else None
    except ValueError:
        return None


async def _holds(api: Api, user_id: str, key: bytes | None, ident: Identity) -> bool | None:
    """True: secret storage holds ``ident`` under ``key``; False: it does not; None: it holds a master
    key the bot has no recovery key to check."""
    key_id = str((await _data(api, user_id, "m.secret_storage.default_key")).get("key") or "")
    enc = ((await _data(api, user_id, "m.cross_signing.master")).get("encrypted") or {}).get(key_id)
    if not key_id or not isinstance(enc, dict):
        return False
    if key is None:
        return None
    if not key_fits(key, await _data(api, user_id, f"m.secret_storage.key.{key_id}")):
        return False
    try:
        return unb64(decrypt(key, "m.cross_signing.master", enc).decode()) == ident.master.seed
    except (ValueError, KeyError, UnicodeDecodeError):
        return False


async def ensure_stored(
    api: Api, user_id: str, ident: Identity, state_path: str | Path, recovery_key: str | None
) -> None:
    """Keep ``ident`` in secret storage, unless it is there already or storage holds an identity the bot has no
    key to check (left alone). Raises what :meth:`Api.call` raises."""
    key = _known_key(state_path, recovery_key)
    if await _holds(api, user_id, key, ident) is not False:
        return
    if key is None:
        key = os.urandom(32)
        write_key(key_file(state_path), encode_recovery_key(key))
        log.warning("recovery_key_written", path=str(key_file(state_path)),
                    hint="copy this recovery key to where you keep the bot's password (matrix.recovery_key or env "
                    "PERMISSION_BOT_MATRIX_RECOVERY_KEY): a new state folder needs it to keep the bot's identity")
    await store(api, user_id, ident, key)
    log.info("cross_signing_stored", key_name=KEY_NAME)


async def store(api: Api, user_id: str, ident: Identity, key: bytes) -> None:
    """Write the identity's three private keys into secret storage under a new default key ``key``."""
    key_id = b64(os.urandom(24)).replace("/", "_").replace("+", "-")
    await _put(api, user_id, f"m.secret_storage.key.{key_id}", key_description(key, KEY_NAME))
    for usage in USAGES:
        name = f"m.cross_signing.{usage}"
        seed = ident.key(usage).seed
        await _put(api, user_id, name, {"encrypted": {key_id: encrypt(key, name, b64(seed).encode(), new_iv())}})
    await _put(api, user_id, "m.secret_storage.default_key", {"key": key_id})


def write_key(path: Path, text: str) -> None:
    """Keep the recovery key in the state folder (0600)."""
    write_private(path, text + "\n")
