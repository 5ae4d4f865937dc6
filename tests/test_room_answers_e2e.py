"""Answering in the room (real Synapse, alice answers, bob may not, carol by power level)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from bot.answers import KEYCAPS
from tests.support.human import content, rel
from tests.support.station import Station, request_body

pytestmark = pytest.mark.e2e


async def _drain(station: Station) -> None:
    """Settle whatever other tests left pending so plain answers are unambiguous."""
    await station.drain()


@pytest.mark.parametrize(
    ("answer", "option"),
    [("2", "allow_always"), (" 3. ", "reject_once"), ("#1", "allow_once"), ("never ALLOW", "reject_always"),
     ("reject_once", "reject_once")],
)
async def test_reply_by_number_label_or_id(station: Station, sid: str, answer: str, option: str) -> None:
    rec, prompt = await station.submit(request_body(sid))
    await station.alice.text(answer, reply_to=prompt["event_id"])
    got = await station.record(rec["id"])
    assert got["state"] == "resolved" and got["outcome"]["option_id"] == option
    assert got["outcome"]["via"] == "matrix" and got["outcome"]["answered_by"] == station.alice.user_id
    edit = await station.edit_of(prompt["event_id"])
    assert edit and content(edit)["m.new_content"]["resolution"]["answered_by"] == station.alice.user_id


async def test_thread_message_answers_with_feedback(station: Station, sid: str) -> None:
    rec, prompt = await station.submit(request_body(sid))
    await station.alice.text("3 - because the tests are flaky", thread=prompt["event_id"])
    got = await station.record(rec["id"])
    assert got["outcome"]["option_id"] == "reject_once"
    assert got["outcome"]["feedback"] == "because the tests are flaky"
    edit = await station.edit_of(prompt["event_id"])
    assert edit and "because the tests are flaky" in content(edit)["m.new_content"]["body"]


async def test_reaction_answers_and_the_two_seeds_stay(station: Station, sid: str) -> None:
    """The bot seeds 1️⃣ and the deny keycap (3️⃣ here), no more; any keycap answers; the seeds stay once it is
    settled (the edit shows the outcome): no redaction for every member's client to download."""
    rec, prompt = await station.submit(request_body(sid))

    def seed(key: str) -> Any:
        return lambda e: (e.get("type") == "m.reaction" and e.get("sender") == station.bot_id
                          and rel(e).get("event_id") == prompt["event_id"] and rel(e).get("key") == key)

    assert await station.alice.wait(seed(KEYCAPS[2]), 20), "the bot did not seed the deny keycap"
    assert station.alice.find(seed(KEYCAPS[0])) and not station.alice.find(seed(KEYCAPS[1]))
    await station.alice.react(prompt["event_id"], "2\u20e3")  # without U+FE0F; not seeded, still an answer
    got = await station.record(rec["id"])
    assert got["outcome"]["option_id"] == "allow_always" and got["outcome"]["via"] == "reaction"
    edit = await station.edit_of(prompt["event_id"])
    assert edit, "the prompt was not edited"
    size = lambda e: len(json.dumps(content(e), ensure_ascii=False).encode())  # noqa: E731
    assert size(edit) < size(prompt), (size(edit), size(prompt))  # the lean edit weighs less than the prompt
    assert content(edit)["body"].startswith("* ✅ Approved (Always allow)") and "\n" not in content(edit)["body"]
    assert "1. Allow once" not in content(edit)["m.new_content"]["body"]
    await asyncio.sleep(2)
    seeds = {e["event_id"] for e in station.alice.find(seed(KEYCAPS[0])) + station.alice.find(seed(KEYCAPS[2]))}
    assert not station.alice.find(lambda e: e.get("type") == "m.room.redaction"
                                  and (e.get("redacts") in seeds or content(e).get("redacts") in seeds))
    assert not station.alice.find(seed(KEYCAPS[3]))


async def test_structured_answer_and_stale_refusal(station: Station, sid: str) -> None:
    rec, _prompt = await station.submit(request_body(sid))
    mark = station.alice.mark()
    stale = {"request_id": rec["id"], "option_id": "allow_once", "subject": {"digest": "0" * 64, "revision": 1}}
    await station.alice.text("(structured)", extra={"dev.agentpod.permission.answer": stale})
    assert await station.notice_after(mark), "no notice for a stale structured answer"
    got = await station.record(rec["id"], 1)
    assert got["state"] == "pending"
    good = {"request_id": rec["id"], "option_id": "reject_always",
            "subject": {"digest": rec["digest"], "revision": rec["revision"]}, "feedback": "not today"}
    await station.alice.text("(structured)", extra={"dev.agentpod.permission.answer": good})
    got = await station.record(rec["id"])
    assert got["outcome"]["option_id"] == "reject_always" and got["outcome"]["via"] == "structured"
    assert got["outcome"]["feedback"] == "not today"


async def test_two_pending_plain_number_resolves_neither(station: Station, sid: str) -> None:
    await _drain(station)
    r1, p1 = await station.submit(request_body(sid))
    r2, p2 = await station.submit(request_body(sid))
    mark = station.alice.mark()
    await station.alice.text("1")
    notice = await station.notice_after(mark)
    assert notice and r1["id"] in content(notice)["body"] and r2["id"] in content(notice)["body"]
    assert (await station.record(r1["id"], 1))["state"] == "pending"
    assert (await station.record(r2["id"], 1))["state"] == "pending"
    await station.alice.text("1", reply_to=p2["event_id"])
    assert (await station.record(r2["id"]))["outcome"]["option_id"] == "allow_once"
    assert (await station.record(r1["id"], 1))["state"] == "pending"
    assert await station.edit_of(p2["event_id"])
    # r1 is now the only one pending, but the room changed since its prompt (r2 was posted and
    # settled after it): a plain answer is not guessed (CONTRACT: plain-answer binding)
    mark = station.alice.mark()
    await station.alice.text("4")
    notice = await station.notice_after(mark, contains="Which request do you mean?")
    assert notice and r1["id"] in content(notice)["body"]
    assert (await station.record(r1["id"], 1))["state"] == "pending"
    await station.alice.text("4", reply_to=p1["event_id"])
    assert (await station.record(r1["id"]))["outcome"]["option_id"] == "reject_always"


async def test_non_answerer_changes_nothing_and_is_told_once(station: Station, sid: str) -> None:
    rec, prompt = await station.submit(request_body(sid))
    await station.bob.follow()
    mark = station.bob.mark()
    await station.bob.text("1", reply_to=prompt["event_id"])
    await station.bob.react(prompt["event_id"], KEYCAPS[0])
    await station.bob.text("x", extra={"dev.agentpod.permission.answer": {"request_id": rec["id"],
                                                                          "option_id": "allow_once"}})
    told = await station.notice_after(mark, human=station.bob, contains=station.bob.user_id)
    assert told, "bob was not told he may not answer"
    await asyncio.sleep(2)
    assert (await station.record(rec["id"], 1))["state"] == "pending"
    notices = station.bob.find(lambda e: e.get("sender") == station.bot_id
                               and station.bob.user_id in content(e).get("body", ""), start=mark)
    assert len(notices) == 1
    await station.alice.text("1", reply_to=prompt["event_id"])
    assert (await station.record(rec["id"]))["outcome"]["answered_by"] == station.alice.user_id


async def test_first_answer_wins_and_late_ones_get_a_notice(station: Station, sid: str) -> None:
    rec, prompt = await station.submit(request_body(sid))
    await station.alice.text("1", reply_to=prompt["event_id"])
    assert (await station.record(rec["id"]))["outcome"]["option_id"] == "allow_once"
    mark = station.alice.mark()
    await station.alice.text("3", reply_to=prompt["event_id"])
    notice = await station.notice_after(mark, contains="Already settled")
    assert notice and "Allow once" in content(notice)["body"]
    assert rel(notice).get("rel_type") == "m.thread" and rel(notice).get("event_id") == prompt["event_id"]
    assert (await station.record(rec["id"]))["outcome"]["option_id"] == "allow_once"
    st, _ = await station.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "deny"})
    assert st == 404


async def test_edits_are_not_answers(station: Station, sid: str) -> None:
    rec, prompt = await station.submit(request_body(sid))
    ev = await station.alice.text("hmm, let me look", reply_to=prompt["event_id"])
    await station.alice.edit(ev, "1")
    await asyncio.sleep(2)
    assert (await station.record(rec["id"], 1))["state"] == "pending"
    await station.alice.text("2", reply_to=prompt["event_id"])
    assert (await station.record(rec["id"]))["outcome"]["option_id"] == "allow_always"


async def test_unparsable_reply_gets_the_valid_answers(station: Station, sid: str) -> None:
    rec, prompt = await station.submit(request_body(sid))
    mark = station.alice.mark()
    await station.alice.text("approve?", reply_to=prompt["event_id"])  # one word, no option: the answers
    notice = await station.notice_after(mark)
    assert notice and "Allow once" in content(notice)["body"]
    assert (await station.record(rec["id"], 1))["state"] == "pending"
    await station.ahttp("POST", f"/permissions/{rec['id']}", {"decision": "deny"})


async def test_a_plain_number_with_no_option_is_told_and_the_last_line_names_the_deny(
    station: Station, sid: str
) -> None:
    """Two options: the prompt's last line says 2 denies; a plain "3" (no reply) is told there is no option 3."""
    await _drain(station)
    opts = [("ok", "Allow once", "allow_once"), ("no", "Reject", "reject_once")]
    rec, prompt = await station.submit(request_body(sid, options=opts))
    body = content(prompt)["body"]
    assert body.splitlines()[-1] == "Reply with the number (2 denies), or the option's name.", body
    mark = station.alice.mark()
    await station.alice.text("3")  # plain: bound to the one open prompt just above it
    notice = await station.notice_after(mark, contains="There is no option 3")
    assert notice and "Allow once" in content(notice)["body"]
    assert (await station.record(rec["id"], 1))["state"] == "pending"
    await station.alice.text("2")
    assert (await station.record(rec["id"]))["outcome"]["option_id"] == "no"


async def test_answers_given_while_the_daemon_was_down_apply_once(station: Station, sid: str) -> None:
    recs = [await station.submit(request_body(sid)) for _ in range(3)]
    station.stop_daemon()
    try:
        for (_rec, prompt), answer in zip(recs, ["1", "2", "4"], strict=True):
            await station.alice.text(answer, reply_to=prompt["event_id"])
        # padding so the bot's next sync is limited and it has to backfill
        for i in range(25):
            await station.bob.text(f"chatter {i}")
    finally:
        station.start_daemon()
        await station.wait_healthy()
    for (rec, _p), option in zip(recs, ["allow_once", "allow_always", "reject_always"], strict=True):
        got = await station.record(rec["id"], 20)
        assert got["state"] == "resolved" and got["outcome"]["option_id"] == option
    await station.restart_daemon()
    await asyncio.sleep(2)
    for _rec, prompt in recs:
        edits = station.alice.find(lambda e, p=prompt: e.get("sender") == station.bot_id
                                   and rel(e).get("rel_type") == "m.replace"
                                   and rel(e).get("event_id") == p["event_id"])
        assert len(edits) == 1


async def test_power_level_answerers(station: Station, sid: str) -> None:
    text = station.config_text().replace(
        f'users = ["{station.alice.user_id}"]', f'users = ["{station.alice.user_id}"]\nmin_power_level = 50')
    station.config_path.write_text(text)
    await station.restart_daemon()
    try:
        rec, prompt = await station.submit(request_body(sid))
        await station.bob.text("1", reply_to=prompt["event_id"])  # power 0: refused
        await asyncio.sleep(1.5)
        assert (await station.record(rec["id"], 1))["state"] == "pending"
        await station.carol.text("2", reply_to=prompt["event_id"])  # power 50
        got = await station.record(rec["id"])
        assert got["outcome"]["answered_by"] == station.carol.user_id
    finally:
        station.write_config()
        await station.restart_daemon()
