"""Checkpoints read back from a room (bot.events.checkpoints): the state event, the older notice, and a
redacted one as a gap naming the seqs it covered (pure)."""

from __future__ import annotations

from typing import Any

from bot.events.checkpoints import CHECKPOINT_TYPE, Unreadable, describe, gaps, sighting
from bot.events.ledger import CHECKPOINT_KEY

H = "a" * 64


def _state(seq: int | None, eid: str = "$s", redacted_by: str | None = None) -> dict[str, Any]:
    ev: dict[str, Any] = {"type": CHECKPOINT_TYPE, "state_key": "", "event_id": eid,
                          "content": {} if seq is None else {"seq": seq, "hash": H}}
    if redacted_by:
        ev["unsigned"] = {"redacted_because": {"sender": redacted_by, "type": "m.room.redaction"}}
    return ev


def test_what_each_event_is() -> None:
    assert sighting(_state(3)) == (3, H)
    notice = {"msgtype": "m.notice", CHECKPOINT_KEY: {"seq": 2, "hash": H}}
    assert sighting({"type": "m.room.message", "content": notice}) == (2, H)
    assert sighting({"type": "m.room.message", "content": {}}) is None  # a redacted message: not known as one
    assert sighting({"type": "m.room.encrypted", "content": {"ciphertext": "x"}}) is None
    assert sighting({"type": CHECKPOINT_TYPE, "content": {"seq": 1, "hash": H}}) is None  # not a state event
    gone = sighting(_state(None, "$r", redacted_by="@mod:hs"))
    assert gone == Unreadable("$r", "redacted by @mod:hs")
    bad = sighting({**_state(None, "$b"), "content": {"seq": "1", "hash": H}})
    assert isinstance(bad, Unreadable) and "not a checkpoint" in bad.why


def test_a_redacted_checkpoint_names_the_seqs_it_covered() -> None:
    r = Unreadable("$r", "redacted by @mod:hs")
    assert gaps("default", [(3, H), (7, H)]) == []
    (g,) = gaps("default", [(3, H), r, (9, H)])
    assert (g.first, g.last) == (4, 9)
    assert describe(g, 12).startswith("seqs 4 to 9: a checkpoint of the bot's in room default cannot be read")
    (g,) = gaps("infra", [(3, H), r])  # the newest: up to the ledger's end
    assert (g.first, g.last) == (4, None) and describe(g, 12).startswith("seqs 4 to 12:")
    assert describe(g, 3).startswith("seq 4 and after:")
    (g,) = gaps("infra", [r])
    assert g.first == 1 and "redacted by @mod:hs" in describe(g, 5) and "$r" in describe(g, 5)
