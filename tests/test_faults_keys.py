"""The E2EE key upload under a stop: shielded from cancellation, and the "already exists" state a
lost upload leaves behind recovered (real nio Olm accounts, no homeserver)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from nio import AsyncClient, AsyncClientConfig, KeysUploadError

from bot.matrix import key_upload


def _client(store: Path) -> AsyncClient:
    c = AsyncClient("http://127.0.0.1:9", "@bot:hs", device_id="DEV", store_path=str(store),
                    config=AsyncClientConfig(encryption_enabled=True, store_sync_tokens=False))
    c.user_id, c.access_token = "@bot:hs", "t"
    c.load_store()
    assert c.olm is not None
    return c


async def test_a_stop_during_the_upload_does_not_cut_it_short(tmp_path: Path) -> None:
    c = _client(tmp_path)
    done = asyncio.Event()

    async def slow_upload() -> str:
        await asyncio.sleep(0.3)
        done.set()
        return "uploaded"

    c.keys_upload = slow_upload  # type: ignore[method-assign]
    caller = asyncio.ensure_future(key_upload.upload_keys(c))
    await asyncio.sleep(0.05)
    caller.cancel()  # SIGTERM arrives mid-upload
    await key_upload.finish(5)  # close() waits for it
    assert done.is_set()
    await c.close()


async def test_already_exists_drops_the_unsaved_keys_and_the_next_upload_has_new_ids(tmp_path: Path) -> None:
    c = _client(tmp_path)
    assert c.olm is not None
    first = c.olm.share_keys()["one_time_keys"]  # what a lost upload put on the server
    conflict = KeysUploadError("One time key signed_curve25519:AAAAAQ already exists. Old key: ...")

    async def refused() -> Any:
        return conflict

    c.keys_upload = refused  # type: ignore[method-assign]
    assert await key_upload.upload_keys(c) is conflict
    assert c.olm.account.shared and not c.olm.account.one_time_keys.get("curve25519")
    c.olm.uploaded_key_count = 0  # as the next sync reports
    again = c.olm.share_keys()["one_time_keys"]
    assert again and not set(again) & set(first)
    await c.close()
