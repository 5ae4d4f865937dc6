"""The pure parts of cross-signing: canonical JSON, Ed25519 signatures, the identity file,
the cross-signing chain, /keys/query reading, recovery keys and secret storage."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from bot.matrix.cross_signing import identity_path, load_identity, save_identity
from bot.matrix.errors import MatrixFatal
from bot.matrix.identities import read_query
from bot.matrix.secret_storage import _B58, decode_recovery_key, decrypt, encrypt, key_fits
from bot.matrix.signing import Identity, SigningKey, b64, canonical_json, cross_signed, key_of, unb64, verify

U = "@alice:hs"


def _matrix_canonical(obj: Any) -> bytes:
    """The Matrix spec's canonical JSON (for objects without floats)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def test_canonical_json_is_matrix_canonical_json_for_key_objects() -> None:
    obj = {"user_id": U, "device_id": "DEV", "algorithms": ["m.olm.v1.curve25519-aes-sha2", "m.megolm.v1.aes-sha2"],
           "keys": {"ed25519:DEV": "abc", "curve25519:DEV": "d/e+f"}, "usage": ["master"], "name": "é ü <&>",
           "signatures": {U: {"ed25519:DEV": "x"}}, "unsigned": {"device_display_name": "n"}}
    rest = {k: v for k, v in obj.items() if k not in ("signatures", "unsigned")}
    assert canonical_json(obj) == _matrix_canonical(rest)


def test_sign_and_verify() -> None:
    k = SigningKey.generate()
    signed = k.sign({"a": "b", "unsigned": {"x": "y"}}, U)
    assert verify(signed, U, k.public)
    assert not verify({**signed, "a": "c"}, U, k.public)  # tampered
    assert not verify(signed, "@mallory:hs", k.public)
    assert not verify(signed, U, SigningKey.generate().public)
    assert SigningKey(k.seed).public == k.public and len(k.public) == 43 and "=" not in k.public
    assert unb64(b64(b"\x00\xff\x10")) == b"\x00\xff\x10"


def _device(ident: Identity, signed: bool = True) -> dict[str, Any]:
    dev = {"user_id": U, "device_id": "D1", "algorithms": [], "keys": {"ed25519:D1": "edkey", "curve25519:D1": "c"}}
    return ident.self_signing.sign(dev, U) if signed else dev


def test_the_cross_signing_chain() -> None:
    ident = Identity.generate()
    objs = ident.public_objects(U)
    master, ssk = objs["master_key"], objs["self_signing_key"]
    assert key_of(master) == ident.master.public and verify(ssk, U, ident.master.public)
    assert verify(objs["user_signing_key"], U, ident.master.public)
    assert cross_signed(U, master, ssk, _device(ident)) == ident.master.public
    assert cross_signed(U, master, ssk, _device(ident, signed=False)) is None
    other = Identity.generate()
    assert cross_signed(U, master, ssk, _device(other)) is None  # signed by another self-signing key
    forged = {**ssk, "signatures": {}}
    assert cross_signed(U, master, forged, _device(ident)) is None  # a self-signing key the master did not sign
    assert cross_signed("@bob:hs", master, ssk, _device(ident)) is None


def test_read_query_finds_cross_signed_devices() -> None:
    ident = Identity.generate()
    objs = ident.public_objects(U)
    q = {"master_keys": {U: objs["master_key"]}, "self_signing_keys": {U: objs["self_signing_key"]},
         "device_keys": {U: {"D1": _device(ident), "D2": {**_device(ident, False), "device_id": "D2"},
                             "D3": _device(ident)}}}  # D3's object claims another device id
    uk = read_query(q, [U, "@nobody:hs"])
    assert uk[U].master == ident.master.public and uk[U].devices == {"D1": "edkey"}
    assert uk["@nobody:hs"].master is None and not uk["@nobody:hs"].devices


def test_identity_file_is_private_and_damage_is_one_line(tmp_path: Path) -> None:
    path = identity_path(tmp_path)
    assert load_identity(path) is None
    ident = Identity.generate()
    save_identity(path, ident)
    assert os.stat(path).st_mode & 0o777 == 0o600
    back = load_identity(path)
    assert back is not None and back.master.public == ident.master.public
    for bad in ("{not json", '{"master": "AAAA"}', "[]"):
        path.write_text(bad)
        with pytest.raises(MatrixFatal) as e:
            load_identity(path)
        assert str(path) in str(e.value) and "reset-identity" in str(e.value) and "\n" not in str(e.value)


def encode_recovery_key(key: bytes) -> str:
    raw = b"\x8b\x01" + key
    parity = 0
    for b in raw:
        parity ^= b
    n, out = int.from_bytes(raw + bytes([parity]), "big"), ""
    while n:
        n, r = divmod(n, 58)
        out = _B58[r] + out
    return " ".join(out[i : i + 4] for i in range(0, len(out), 4))


def test_recovery_key_and_secret_storage_round_trip() -> None:
    key = os.urandom(32)
    text = encode_recovery_key(key)
    assert decode_recovery_key(text) == key
    with pytest.raises(ValueError, match="check byte"):
        decode_recovery_key(text[:-1] + ("a" if text[-1] != "a" else "b"))
    with pytest.raises(ValueError):
        decode_recovery_key("not-a-key!")
    iv = os.urandom(16)
    desc = encrypt(key, "", b"\0" * 32, iv)
    assert key_fits(key, {"iv": desc["iv"], "mac": desc["mac"]})
    assert not key_fits(os.urandom(32), {"iv": desc["iv"], "mac": desc["mac"]})
    secret = encrypt(key, "m.cross_signing.master", b"seed-text", os.urandom(16))
    assert decrypt(key, "m.cross_signing.master", secret) == b"seed-text"
    with pytest.raises(ValueError):
        decrypt(key, "m.cross_signing.self_signing", secret)  # the name is part of the key


def test_the_bots_recovery_key_is_elements_format_and_its_key_description_fits() -> None:
    from bot.matrix.secret_storage import encode_recovery_key as product_encode
    from bot.matrix.secret_storage import key_description, new_iv

    key = os.urandom(32)
    assert product_encode(key) == encode_recovery_key(key) and decode_recovery_key(product_encode(key)) == key
    desc = key_description(key, "permission-bot")
    assert desc["algorithm"] == "m.secret_storage.v1.aes-hmac-sha2" and desc["name"] == "permission-bot"
    assert key_fits(key, desc) and not key_fits(os.urandom(32), desc)
    assert all(unb64(b64(new_iv()))[8] & 0x80 == 0 for _ in range(50))  # the spec's clear bit 63
