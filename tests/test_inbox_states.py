"""bot/events/states: states and vias as StrEnums, stored, sent and logged as the same words as before."""

from __future__ import annotations

import json

import pytest

from bot.events.states import VIA_WORDS, State, Via
from bot.inbox import record
from bot.inbox.record import Settlement
from bot.inbox.store import Inbox
from bot.inbox.submission import parse_submission
from tests.support.station import request_body


def test_the_words_are_the_contract_words_and_the_old_names_stay() -> None:
    assert [str(s) for s in State] == ["pending", "resolved", "expired", "cancelled"]
    assert [str(v) for v in Via] == ["matrix", "reaction", "structured", "api", "rule", "timeout", "cancel"]
    assert (record.PENDING, record.RESOLVED, record.EXPIRED, record.CANCELLED) == tuple(State)
    assert record.STATES == tuple(State) and record.VIAS == tuple(Via)
    assert set(VIA_WORDS) == set(Via)


def test_a_member_reads_as_its_word_in_json_logs_and_comparisons() -> None:
    assert json.dumps({"state": State.EXPIRED, "via": Via.RULE}) == '{"state": "expired", "via": "rule"}'
    assert repr(Via.RULE) == "'rule'" and f"{State.PENDING}" == "pending"
    assert State.RESOLVED == "resolved" and Via("api") is Via.API


def test_a_settlement_says_its_state_and_refuses_pending() -> None:
    assert Settlement("allow_once", "@a:x", Via.MATRIX, 1.0).state is State.RESOLVED
    assert Settlement(None, "client", Via.CANCEL, 1.0).state is State.CANCELLED
    assert Settlement(None, "timeout", Via.TIMEOUT, 1.0, state=State.EXPIRED).state is State.EXPIRED
    with pytest.raises(ValueError, match="resolved, expired or cancelled, not 'pending'"):
        Settlement("allow_once", "@a:x", Via.MATRIX, 1.0, state=State.PENDING)


async def test_the_store_hands_back_members(sqlite_inbox: Inbox) -> None:
    rec, _ = await sqlite_inbox.submit(parse_submission(request_body("s")), 1.0, 60)
    assert rec.state is State.PENDING
    done = await sqlite_inbox.settle(rec.id, Settlement(option_id=None, by="client", via=Via.CANCEL, now=2.0))
    assert done is not None and done.state is State.CANCELLED
    assert done.outcome is not None and done.outcome.via is Via.CANCEL
    assert done.to_api()["state"] == "cancelled" and done.to_api()["outcome"]["via"] == "cancel"
