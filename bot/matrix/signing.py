"""Matrix signing, pure: canonical JSON, Ed25519 keys and signatures, cross-signing key objects.

Canonical JSON is RFC 8785 (the ``rfc8785`` package): for the objects signed here
(strings, lists and objects only, no floats) it is byte for byte Matrix's canonical
JSON (sorted keys, no spaces, UTF-8). Ed25519 comes from pycryptodome (a matrix-nio
dependency). Keys and signatures travel as unpadded base64.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import rfc8785
from Crypto.PublicKey import ECC
from Crypto.Signature import eddsa

USAGES = ("master", "self_signing", "user_signing")


def b64(data: bytes) -> str:
    """Unpadded standard base64, as Matrix writes keys and signatures."""
    return base64.b64encode(data).decode().rstrip("=")


def unb64(text: str) -> bytes:
    """Decode unpadded (or padded) standard or URL-safe base64; ValueError when it is not."""
    t = text.strip().replace("-", "+").replace("_", "/")
    return base64.b64decode(t + "=" * (-len(t) % 4), validate=True)


def canonical_json(obj: Mapping[str, Any]) -> bytes:
    """The bytes a Matrix signature covers: ``obj`` without ``signatures`` and ``unsigned``."""
    rest = {k: v for k, v in obj.items() if k not in ("signatures", "unsigned")}
    return rfc8785.dumps(rest)


class SigningKey:
    """An Ed25519 private key (its 32-byte seed) that signs Matrix JSON."""

    def __init__(self, seed: bytes) -> None:
        if len(seed) != 32:
            raise ValueError("an Ed25519 seed is 32 bytes")
        self.seed = seed
        self._key = ECC.construct(curve="Ed25519", seed=seed)
        self.public = b64(self._key.public_key().export_key(format="raw"))

    @classmethod
    def generate(cls) -> SigningKey:
        return cls(ECC.generate(curve="Ed25519").seed)

    def sign(self, obj: Mapping[str, Any], user_id: str, key_id: str | None = None) -> dict[str, Any]:
        """A copy of ``obj`` with this key's signature added under ``signatures[user_id]``."""
        out = copy.deepcopy(dict(obj))
        sig = b64(eddsa.new(self._key, "rfc8032").sign(canonical_json(obj)))
        out.setdefault("signatures", {}).setdefault(user_id, {})[f"ed25519:{key_id or self.public}"] = sig
        return out


def verify(obj: Mapping[str, Any], user_id: str, public: str, key_id: str | None = None) -> bool:
    """Does ``obj`` carry a valid signature by ``user_id``'s Ed25519 key ``public``?

    ``key_id``: the name the signature is under (a device signs as ``ed25519:DEVICE_ID``); by default
    ``ed25519:`` + the public key, as cross-signing keys sign."""
    sigs = obj.get("signatures")
    mine = sigs.get(user_id) if isinstance(sigs, Mapping) else None
    sig = mine.get(key_id or f"ed25519:{public}") if isinstance(mine, Mapping) else None
    if not isinstance(sig, str):
        return False
    try:
        pub = eddsa.import_public_key(unb64(public))
        eddsa.new(pub, "rfc8032").verify(canonical_json(obj), unb64(sig))
    except (ValueError, TypeError):
        return False
    return True


def key_of(obj: Any) -> str | None:
    """The (one) Ed25519 public key a cross-signing key object holds."""
    keys = obj.get("keys") if isinstance(obj, Mapping) else None
    if not isinstance(keys, Mapping):
        return None
    for kid, val in keys.items():
        if isinstance(kid, str) and kid.startswith("ed25519:") and isinstance(val, str):
            return val
    return None


@dataclass(frozen=True)
class Identity:
    """The three cross-signing private keys of one account."""

    master: SigningKey
    self_signing: SigningKey
    user_signing: SigningKey

    @classmethod
    def generate(cls) -> Identity:
        return cls(SigningKey.generate(), SigningKey.generate(), SigningKey.generate())

    def key(self, usage: str) -> SigningKey:
        return {"master": self.master, "self_signing": self.self_signing, "user_signing": self.user_signing}[usage]

    def public_objects(self, user_id: str) -> dict[str, dict[str, Any]]:
        """The body of ``/keys/device_signing/upload`` (without auth): master, self- and user-signing keys."""
        out: dict[str, dict[str, Any]] = {}
        for usage in USAGES:
            pub = self.key(usage).public
            obj: dict[str, Any] = {"user_id": user_id, "usage": [usage], "keys": {f"ed25519:{pub}": pub}}
            if usage != "master":
                obj = self.master.sign(obj, user_id)
            out[f"{usage}_key"] = obj
        return out

    def to_json(self) -> dict[str, str]:
        return {usage: b64(self.key(usage).seed) for usage in USAGES}

    @classmethod
    def from_json(cls, d: Any) -> Identity:
        """ValueError naming what is wrong when ``d`` is not three 32-byte seeds."""
        if not isinstance(d, Mapping):
            raise ValueError("not a JSON object")
        keys = []
        for usage in USAGES:
            v = d.get(usage)
            if not isinstance(v, str):
                raise ValueError(f"{usage}: missing")
            try:
                keys.append(SigningKey(unb64(v)))
            except ValueError:
                raise ValueError(f"{usage}: not a base64 Ed25519 seed") from None
        return cls(*keys)


def device_signed_by(device_keys: Mapping[str, Any], user_id: str, ssk_public: str | None) -> bool:
    """Is the device's key object signed by the user's self-signing key?"""
    return bool(ssk_public) and verify(device_keys, user_id, str(ssk_public))


def cross_signed(user_id: str, master: Any, self_signing: Any, device_keys: Mapping[str, Any]) -> str | None:
    """The user's master key when ``device_keys`` is cross-signed by its owner, else None.

    The chain: the self-signing key object is signed by the master key, and the device
    keys are signed by the self-signing key; all of them belong to ``user_id``.
    """
    if not isinstance(master, Mapping) or not isinstance(self_signing, Mapping):
        return None
    mpub, spub = key_of(master), key_of(self_signing)
    if not mpub or not spub or master.get("user_id") != user_id or self_signing.get("user_id") != user_id:
        return None
    if "master" not in (master.get("usage") or []) or "self_signing" not in (self_signing.get("usage") or []):
        return None
    if device_keys.get("user_id") != user_id or not verify(self_signing, user_id, mpub):
        return None
    return mpub if device_signed_by(device_keys, user_id, spub) else None
