"""e2ee reset-identity reads matrix.recovery_key before it publishes anything: a value that is not a recovery
key is refused (ValueError, the CLI's one line) with the bot's identity on the homeserver unchanged."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bot.cli import e2ee_cmd
from bot.config import parse_config
from bot.matrix import cross_signing


def test_a_bad_recovery_key_publishes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = parse_config(
        {
            "matrix": {
                "homeserver": "http://hs",
                "user_id": "@b:hs",
                "room": "!r:hs",
                "password": "pw-123456",
                "recovery_key": "not a recovery key",
            },
            "state": {"path": str(tmp_path)},
        },
        env={},
    )
    published: list[Any] = []

    class _Inbox:
        async def close(self) -> None:
            return None

    async def session(_cfg: Any) -> tuple[_Inbox, dict[str, Any]]:
        return _Inbox(), {"access_token": "tok-123456", "device_id": ""}  # no device to sign

    async def upload(*args: Any) -> None:
        published.append(args)

    monkeypatch.setattr(e2ee_cmd, "_session", session)
    monkeypatch.setattr(cross_signing, "upload_identity", upload)
    with pytest.raises(ValueError):
        asyncio.run(e2ee_cmd.reset_identity(cfg, "pw-123456"))
    assert published == []  # before the fix: the new identity was published, then the key refused
    assert not cross_signing.identity_path(cfg.state_dir).exists()
