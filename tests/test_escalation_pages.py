"""The escalation's pages over a real inbox (SQLite) and a recording stand-in for the room: one page per room
per ``after`` window naming every prompt due; a burst paged together; a page recorded but not marked (a crash
in between) sent again with the same txn id, not a new one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.config import parse_config
from bot.inbox.store import Inbox
from bot.inbox.submission import parse_submission
from bot.service.escalation import KV, Escalations
from tests.support.station import request_body

AFTER = 100.0
CFG: dict[str, Any] = {
    "matrix": {"homeserver": "http://hs", "user_id": "@b:hs", "room": "!r:hs", "password": "pw"},
    "escalation": {"after": AFTER, "mention": ["@oncall:hs"]},
}


class _Room:
    room_id = "!r:hs"


class _Matrix:
    """What Escalations uses of the Matrix side: its rooms and ``send``; the sends kept."""

    def __init__(self) -> None:
        self.rooms = {"default": _Room()}
        self.sent: list[tuple[dict[str, Any], str]] = []

    async def send(self, content: dict[str, Any], txn: str, event_type: str = "m.room.message", *,
                   room: str = "default") -> str:
        self.sent.append((content, txn))
        return f"$page{len(self.sent)}"


class _Clock:
    t = 1000.0

    def __call__(self) -> float:
        return self.t


async def _prompt(inbox: Inbox, sid: str, at: float) -> str:
    rec, _ = await inbox.submit(parse_submission(request_body(sid)), at, 10_000)
    await inbox.set_prompt_event(rec.id, f"$p{sid}", at)
    return rec.id


@pytest.fixture
async def parts(sqlite_inbox: Inbox) -> AsyncIterator[tuple[Inbox, _Clock, _Matrix, Escalations]]:
    inbox, clock, matrix = sqlite_inbox, _Clock(), _Matrix()
    yield inbox, clock, matrix, Escalations(parse_config(CFG, env={}), inbox, matrix, clock)  # type: ignore[arg-type]


async def test_one_page_per_window_naming_every_prompt_due(parts: tuple[Inbox, _Clock, _Matrix, Escalations]) -> None:
    inbox, clock, matrix, esc = parts
    burst = [await _prompt(inbox, f"a{i}", 1000.0 + i) for i in range(20)]  # 20 within 20 s
    clock.t = 1000.0 + AFTER + 1
    wait = await esc.tick()
    assert matrix.sent == [] and 0 < wait <= AFTER / 4  # the oldest is due: a quarter of `after` for the burst
    clock.t += wait
    await esc.tick()
    assert len(matrix.sent) == 1
    body = matrix.sent[0][0]["body"]
    assert body.startswith("@oncall:hs: 20 prompts") and all(f"$pa{i}" in body for i in range(20))
    recs = [await inbox.get(i) for i in burst]
    assert all(r is not None and r.escalated_at is not None for r in recs)
    first = clock.t
    late = await _prompt(inbox, "late", 1030.0)  # not due at the first page; due within its window
    clock.t = first + AFTER - 1
    wait = await esc.tick()
    assert len(matrix.sent) == 1 and abs(wait - 1.0) < 1e-6  # it waits for the window's end
    clock.t += wait
    await esc.tick()
    assert len(matrix.sent) == 2 and "$plate" in matrix.sent[1][0]["body"]
    assert matrix.sent[1][0]["m.relates_to"] == {"m.in_reply_to": {"event_id": "$plate"}}
    assert (await inbox.get(late)).escalated_at is not None  # type: ignore[union-attr]


async def test_a_page_recorded_but_not_marked_goes_again_with_its_txn(
    parts: tuple[Inbox, _Clock, _Matrix, Escalations],
) -> None:
    inbox, clock, matrix, esc = parts
    rid = await _prompt(inbox, "c", 1000.0)
    clock.t = 1000.0 + AFTER * 2
    await esc.tick()
    (_, txn), = matrix.sent
    last = await inbox.get_json(KV + "default")
    # as if the daemon died after the send, before the marks: the record says not done, none escalated
    await inbox.database.execute("UPDATE requests SET escalated_at=NULL, escalated_to=NULL WHERE id=$1", rid)
    await inbox.set_json(KV + "default", {**last, "done": False})
    clock.t += 5
    await esc.tick()
    assert [t for _, t in matrix.sent] == [txn, txn]  # the same page again: the homeserver answers the first
    assert (await inbox.get(rid)).escalated_at is not None  # type: ignore[union-attr]
    assert (await inbox.get_json(KV + "default"))["done"] is True
