"""A client's structured answer to a question (issue 33), against the real daemon and Synapse: ``option_ids``
gives several choices of a multi-select question, ``text`` the person's own words. The same guarantees as
``option_id``: only answerers, the prompt's current digest and revision, an option not offered refused with a
notice; the hook gets exactly the answers."""

from __future__ import annotations

from typing import Any

import pytest

from bot.answers import ANSWER_KEY
from tests.support.human import content
from tests.support.station import Station
from tests.test_hooks_e2e import finish
from tests.test_questions_e2e import Q1, Q2, answered, form

pytestmark = pytest.mark.e2e


def payload(prompt: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A structured answer to ``prompt``, bound to its digest and revision."""
    c = content(prompt)
    subject = {"digest": c["subject"]["digest"], "revision": c["subject"]["revision"]}
    return {ANSWER_KEY: {"request_id": c["request_id"], "subject": subject, **fields}}


async def refused(station: Station, prompt: dict[str, Any], words: str, **fields: Any) -> None:
    """Alice's structured answer with ``fields`` gets a notice saying ``words``."""
    mark = station.alice.mark()
    await station.alice.text("answer", reply_to=prompt["event_id"], extra=payload(prompt, **fields))
    notice = await station.notice_after(mark, contains=words)
    assert notice, f"no notice saying {words!r}"


async def test_several_choices_and_free_text_by_structured_answer(station: Station, sid: str) -> None:
    proc, data, first, second = await form(station, sid)
    # attacks first: none of these settles anything
    mark = station.alice.mark()
    await station.bob.text("x", reply_to=second["event_id"], extra=payload(second, option_ids=["Docs"]))
    assert await station.notice_after(mark, contains="not on the list"), "bob's structured answer was not refused"
    await refused(station, second, "Option Kubernetes is not offered", option_ids=["Docker", "Kubernetes"])
    await refused(station, first, "takes one choice", option_ids=["Postgres", "SQLite"])
    stale = payload(second, option_ids=["Docker"])
    stale[ANSWER_KEY]["subject"]["digest"] = "0" * 64
    mark = station.alice.mark()
    await station.alice.text("x", reply_to=second["event_id"], extra=stale)
    assert await station.notice_after(mark, contains="has changed"), "a stale structured answer was not refused"
    # the answers
    await station.alice.text("answer", reply_to=first["event_id"], extra=payload(first, text="MySQL, please"))
    await station.alice.text("answer", reply_to=second["event_id"], extra=payload(second, option_ids=["CI", "Docker"]))
    code, out, _ = await finish(proc)
    assert code == 0 and out == answered(data, {Q1: "MySQL, please", Q2: "Docker, CI"})
    rec = await station.record(content(second)["request_id"])
    assert rec["outcome"]["via"] == "structured" and rec["outcome"]["chosen"] == ["Docker", "CI"]
    assert rec["outcome"]["answered_by"] == station.alice.user_id
    own = await station.record(content(first)["request_id"])
    assert own["outcome"]["answers"] == {Q1: "MySQL, please"} and own["outcome"]["chosen"] == []
