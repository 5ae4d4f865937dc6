"""Secret storage (SSSS) crypto, pure: a recovery key decoded, the default key checked, a secret
decrypted (``m.secret_storage.v1.aes-hmac-sha2``: HKDF-SHA256, AES-CTR, HMAC-SHA256, all from
pycryptodome). :func:`bot.matrix.cross_signing.import_identity` reads the account data with it.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Mapping
from functools import reduce
from operator import xor
from typing import Any

from Crypto.Cipher import AES
from Crypto.Hash import HMAC, SHA256
from Crypto.Protocol.KDF import HKDF

from bot.matrix.signing import b64, unb64

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
    if reduce(xor, raw[:-1]) != raw[-1]:
        raise ValueError("not a recovery key (its check byte does not fit; a typo?)")
    return raw[2:34]


def encode_recovery_key(key: bytes) -> str:
    """The 32-byte ``key`` as Element writes a recovery key: base58 in groups of four ("EsT... ...")."""
    raw = b"\x8b\x01" + key
    n, out = int.from_bytes(raw + bytes([reduce(xor, raw)]), "big"), ""
    while n:
        n, r = divmod(n, 58)
        out = _B58[r] + out
    return " ".join(out[i : i + 4] for i in range(0, len(out), 4))


def new_iv() -> bytes:
    """16 random bytes with bit 63 clear (the spec's AES-CTR counter room)."""
    iv = bytearray(os.urandom(16))
    iv[8] &= 0x7F
    return bytes(iv)


def key_description(key: bytes, name: str) -> dict[str, str]:
    """``m.secret_storage.key.<id>``'s content for ``key`` (its iv and the mac that proves a key fits)."""
    check = encrypt(key, "", b"\0" * 32, new_iv())
    return {"algorithm": ALGORITHM, "name": name, "iv": check["iv"], "mac": check["mac"]}


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
