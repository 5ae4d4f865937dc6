"""The outbox in-process: keycap seeding and clean-up never stand in front of a prompt or an edit.

The shared fake Matrix façade (tests/support/fakematrix.py) records every send in order; the inbox is the
real SQLite one.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from bot.config import PromptsConfig
from bot.inbox.store import Inbox
from bot.inbox.submission import parse_submission
from bot.metrics import Metrics
from bot.outbox import Outbox
from tests.support.fake_facade import FakeMatrix
from tests.support.station import request_body


async def _until(pred: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


@pytest.fixture
async def rig(tmp_path: Path):
    inbox = Inbox(tmp_path / "inbox.sqlite3")
    await inbox.open()
    matrix = FakeMatrix()
    stop = asyncio.Event()

    async def reprocess(_source: dict[str, Any]) -> None:
        return None

    box = Outbox(inbox, matrix, Metrics(), PromptsConfig(), stop, time.time, reprocess)  # type: ignore[arg-type]
    inbox.listen(box.on_change)
    tasks = box.tasks()
    yield inbox, matrix, box
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    await inbox.close()


async def _submit(inbox: Inbox, sid: str, n: int) -> list[str]:
    ids = []
    for i in range(n):
        rec, _ = await inbox.submit(parse_submission(request_body(sid, tool_call_id=f"c{i}")), time.time(), 600)
        ids.append(rec.id)
    return ids


async def _settle(inbox: Inbox, rid: str) -> None:
    await inbox.settle(rid, option_id="allow_once", by="@alice:x", via="matrix", feedback=None, now=time.time())


async def test_edits_are_not_queued_behind_keycap_clean_up(rig: Any) -> None:
    inbox, matrix, _box = rig
    ids = await _submit(inbox, "s", 20)
    await _until(lambda: matrix.kinds().count("reaction") == 20 * 4, timeout=30)  # every prompt seeded
    for rid in ids[:-1]:  # a burst of answers: 76 keycaps to take back
        await _settle(inbox, rid)
    await _until(lambda: "redact" in matrix.kinds())
    await _settle(inbox, ids[-1])  # answered while the clean-up is under way
    await _until(lambda: matrix.kinds().count("edit") == 20)
    edits_at = [i for i, (k, _t) in enumerate(matrix.sent) if k == "edit"]
    redacts_before_last_edit = sum(1 for k in matrix.kinds()[: edits_at[-1]] if k == "redact")
    assert redacts_before_last_edit <= 20, f"the last edit waited behind {redacts_before_last_edit} redactions"
    await _until(lambda: matrix.kinds().count("redact") == 80, timeout=30)  # and the clean-up still finishes


async def test_a_new_prompt_is_not_queued_behind_keycap_seeding(rig: Any) -> None:
    inbox, matrix, _box = rig
    await _submit(inbox, "s", 10)
    await _until(lambda: "reaction" in matrix.kinds(), timeout=10)
    seen = len(matrix.sent)
    await _submit(inbox, "t", 1)
    await _until(lambda: matrix.kinds().count("post") == 11)
    post_at = max(i for i, (k, _t) in enumerate(matrix.sent) if k == "post")
    assert post_at - seen <= 2, matrix.kinds()[seen:post_at + 1]  # at most the reaction already in flight


def _order(matrix: FakeMatrix) -> list[str]:
    return [k for k in matrix.kinds() if k in ("post", "edit")]


async def test_each_edit_goes_before_the_next_prompt(rig: Any) -> None:
    """An agent asks again at once after each answer: the room shows each prompt settled before the next one
    (a plain answer binds only then), and the edit never lands in the middle of the next round."""
    inbox, matrix, _box = rig
    for i in range(5):
        (rid,) = await _submit(inbox, f"s{i}", 1)
        await _until(lambda i=i: _order(matrix).count("post") == i + 1)
        await _settle(inbox, rid)  # answered at once, and the agent asks again at once
    await _until(lambda: _order(matrix).count("edit") == 5)
    assert _order(matrix) == ["post", "edit"] * 5


async def test_txn_ids_carry_the_inbox_install_id(rig: Any) -> None:
    from bot.matrix.txn import txn_id

    inbox, matrix, box = rig
    (rid,) = await _submit(inbox, "s", 1)
    await _until(lambda: "post" in matrix.kinds())
    assert box.install_id == inbox.install_id != ""
    assert ("post", txn_id("p", inbox.install_id, rid)) in matrix.sent
