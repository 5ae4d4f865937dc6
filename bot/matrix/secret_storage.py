"""Import an identity made elsewhere: the cross-signing private keys from secret storage (SSSS).

A recovery key (what Element shows when it sets up "secure backup") opens the account's
default secret storage key (``m.secret_storage.v1.aes-hmac-sha2``: HKDF-SHA256, AES-CTR,
HMAC-SHA256, all from pycryptodome); the three ``m.cross_signing.*`` secrets are decrypted
with it, and must match the published master and self-signing keys.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Any

from Crypto.Cipher import AES
from Crypto.Hash import HMAC, SHA256
from Crypto.Protocol.KDF import HKDF

from bot.matrix.cross_signing import Api, HttpError
from bot.matrix.errors import MatrixFatal
from bot.matrix.signing import USAGES, Identity, SigningKey, b64, unb64

ALGORITHM = "m.secret_storage.v1.aes-hmac-sha2"
_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def decode_recovery_key(text: str) -> bytes:
    """The 32-byte key inside an Element recovery key ("EsT... ..."); ValueError when it is not one."""
    n = 0
    s = "".join(text.split())
    for ch in s:
        i = _B58.find(ch)
        if i < 0:
            raise ValueError("not a recovery key (a character outside base58)")
        n = n * 58 + i
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    raw = b"\0" * (len(s) - len(s.lstrip("1"))) + raw
    if len(raw) != 35 or raw[:2] != b"\x8b\x01":
        raise ValueError("not a recovery key (wrong length or prefix)")
    parity = 0
    for b in raw[:-1]:
        parity ^= b
    if parity != raw[-1]:
        raise ValueError("not a recovery key (its check byte does not fit; a typo?)")
    return raw[2:34]


def _keys(key: bytes, name: str) -> tuple[bytes, bytes]:
    out = HKDF(key, 64, b"\0" * 32, SHA256, context=name.encode())
    assert isinstance(out, bytes)
    return out[:32], out[32:]


def _mac(hkey: bytes, data: bytes) -> str:
    return b64(HMAC.new(hkey, data, SHA256).digest())


def encrypt(key: bytes, name: str, plaintext: bytes, iv: bytes) -> dict[str, str]:
    """One encrypted secret (``{iv, ciphertext, mac}``) as secret storage keeps it."""
    aes, hkey = _keys(key, name)
    ct = AES.new(aes, AES.MODE_CTR, nonce=b"", initial_value=iv).encrypt(plaintext)
    return {"iv": b64(iv), "ciphertext": b64(ct), "mac": _mac(hkey, ct)}


def decrypt(key: bytes, name: str, enc: Mapping[str, Any]) -> bytes:
    """ValueError when the MAC does not fit (another key) or the object is malformed."""
    aes, hkey = _keys(key, name)
    ct = unb64(str(enc["ciphertext"]))
    if not hmac.compare_digest(_mac(hkey, ct), str(enc["mac"]).rstrip("=")):
        raise ValueError("the key does not fit")
    return bytes(AES.new(aes, AES.MODE_CTR, nonce=b"", initial_value=unb64(str(enc["iv"]))).decrypt(ct))


def key_fits(key: bytes, description: Mapping[str, Any]) -> bool:
    """Does ``key`` open the secret storage key ``description`` (its iv + mac check)?"""
    try:
        iv = unb64(str(description["iv"]))
        return encrypt(key, "", b"\0" * 32, iv)["mac"] == str(description["mac"]).rstrip("=")
    except (KeyError, ValueError):
        return False


async def import_identity(
    api: Api, user_id: str, recovery_key: str, master: str | None, ssk: str | None
) -> Identity:
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
            secret = await api.account_data(user_id, name)
            enc = ((secret or {}).get("encrypted") or {}).get(key_id)
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
