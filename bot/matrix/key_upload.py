"""Uploading the device's keys: shielded from a stop, and the "already exists" state recovered.

A stop that cancels ``keys_upload`` after the homeserver stored the one-time keys but before
nio marked them published and saved the account leaves the server holding keys the bot
regenerates, with the same ids, on its next start: every later upload then fails
"already exists". So the upload is shielded from cancellation (``close`` waits for it),
and when that answer comes anyway the unsaved keys are dropped: the next upload generates
keys with new ids. The server's stale keys are used up by claims (a device that claims
one cannot open an Olm session with the bot; it retries with the next key).
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from nio import AsyncClient, KeysUploadError

log = structlog.get_logger("matrix")

_IN_FLIGHT: set[asyncio.Future[Any]] = set()


def is_conflict(r: Any) -> bool:
    return isinstance(r, KeysUploadError) and "already exists" in str(r.message)


async def upload_keys(client: AsyncClient) -> Any:
    """``keys_upload``, finished even when the caller is cancelled; a conflict is recovered."""
    task = asyncio.ensure_future(client.keys_upload())
    _IN_FLIGHT.add(task)
    task.add_done_callback(_IN_FLIGHT.discard)
    r = await asyncio.shield(task)
    if is_conflict(r) and (olm := client.olm) is not None:  # the server holds keys with these ids: drop ours
        log.warning("one_time_keys_conflict", action="dropping the unsaved one-time keys; new ones go up next")
        olm.account.mark_keys_as_published()
        olm.account.shared = True  # the device keys went up with the keys the server kept
        olm.save_account()
    return r


async def finish(timeout: float = 10.0) -> None:
    """Wait (a while) for uploads still in flight: called on close, before the client goes."""
    if _IN_FLIGHT:
        await asyncio.wait(set(_IN_FLIGHT), timeout=timeout)
