"""The daemon's room-event path on the in-process fake homeserver (no Synapse): a submission is posted,
people answer in the room (by number, name, reaction, reply, plain message), the answer settles the
request once, the prompt is edited, the keycaps are taken back; refusals, redelivery, restarts and a
batch failing midway. The daemon runs whole (its Supervisor, inbox, outbox, sync), only its homeserver
is fake."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from typing import Any

import pytest

from bot.answers import KEYCAPS
from bot.inbox.db.fence import Deposed
from tests.support.fake_station import FakeStation, until
from tests.support.human import content, rel
from tests.support.station import request_body


@pytest.mark.parametrize(
    ("answer", "option"),
    [("2", "allow_always"), (" 3. ", "reject_once"), ("never ALLOW", "reject_always"), ("reject_once", "reject_once")],
)
async def test_a_reply_by_number_or_name_settles_and_edits(fst: FakeStation, answer: str, option: str) -> None:
    rec, prompt = await fst.submit(request_body("s1"))
    fst.text(fst.alice, answer, reply_to=prompt["event_id"])
    got = await fst.settled(rec.id)
    assert got.outcome and got.outcome.option_id == option and got.outcome.via == "matrix"
    assert got.outcome.answered_by == fst.alice
    edit = (await until(lambda: fst.edits_of(prompt["event_id"]), what="the settled edit"))[0]
    assert content(edit)["m.new_content"]["resolution"]["answered_by"] == fst.alice


async def test_a_thread_message_answers_with_feedback(fst: FakeStation) -> None:
    rec, prompt = await fst.submit(request_body("s1"))
    fst.text(fst.alice, "3 - because the tests are flaky", thread=prompt["event_id"])
    got = await fst.settled(rec.id)
    assert got.outcome and got.outcome.option_id == "reject_once"
    assert got.outcome.feedback == "because the tests are flaky"


async def test_a_reaction_answers_and_the_two_seeded_keycaps_stay(fst: FakeStation) -> None:
    """Seeded: 1️⃣ (allow once) and 3️⃣ (the one that denies), no more; any keycap answers; once settled the
    seeds stay (the edit shows the outcome: no redactions for every member to download)."""
    rec, prompt = await fst.submit(request_body("s1"))

    def seeds() -> list[str]:
        return [rel(e).get("key") for e in fst.bot_events() if e["type"] == "m.reaction"]

    await until(lambda: len(seeds()) == 2, what="keycaps seeded")
    assert sorted(seeds()) == sorted([KEYCAPS[0], KEYCAPS[2]])
    fst.react(fst.alice, prompt["event_id"], "2\u20e3")  # without U+FE0F: not seeded, still an answer
    got = await fst.settled(rec.id)
    assert got.outcome and got.outcome.option_id == "allow_always" and got.outcome.via == "reaction"
    await until(lambda: [e for e in fst.bot_events() if rel(e).get("rel_type") == "m.replace"], what="the edit")
    await asyncio.sleep(1.5)
    assert not [e for e in fst.bot_events() if e["type"] == "m.room.redaction"] and len(seeds()) == 2


async def test_a_plain_answer_binds_to_the_one_prompt_just_posted(fst: FakeStation) -> None:
    rec, _prompt = await fst.submit(request_body("s1"))
    fst.text(fst.alice, "1")
    got = await fst.settled(rec.id)
    assert got.outcome and got.outcome.option_id == "allow_once"


async def test_two_pending_a_plain_number_settles_neither(fst: FakeStation) -> None:
    r1, _p1 = await fst.submit(request_body("s1"))
    r2, _p2 = await fst.submit(request_body("s2"))
    mark = fst.mark()
    fst.text(fst.alice, "1")
    notice = (await until(lambda: fst.notices(mark), what="a notice"))[0]
    assert r1.id in content(notice)["body"] and r2.id in content(notice)["body"]
    assert await fst.pending_after(r1.id, 0.2) and await fst.pending_after(r2.id, 0)


async def test_a_non_answerer_changes_nothing_and_is_told_once(fst: FakeStation) -> None:
    rec, prompt = await fst.submit(request_body("s1"))
    mark = fst.mark()
    fst.text(fst.bob, "1", reply_to=prompt["event_id"])
    fst.react(fst.bob, prompt["event_id"], KEYCAPS[0])
    fst.text(fst.bob, "x", extra={"dev.agentpod.permission.answer": {"request_id": rec.id, "option_id": "allow_once"}})
    await until(lambda: fst.notices(mark, contains=fst.bob), what="bob told")
    assert await fst.pending_after(rec.id, 0.5)
    assert len(fst.notices(mark, contains=fst.bob)) == 1
    fst.text(fst.alice, "1", reply_to=prompt["event_id"])
    got = await fst.settled(rec.id)
    assert got.outcome and got.outcome.answered_by == fst.alice


async def test_power_level_answerers(fst: FakeStation) -> None:
    fst.answerers = {"users": [fst.alice], "min_power_level": 50}
    await fst.restart()
    rec, prompt = await fst.submit(request_body("s1"))
    fst.text(fst.bob, "1", reply_to=prompt["event_id"])  # power 0: refused
    assert await fst.pending_after(rec.id, 0.3)
    fst.text(fst.carol, "2", reply_to=prompt["event_id"])  # power 50
    got = await fst.settled(rec.id)
    assert got.outcome and got.outcome.answered_by == fst.carol


async def test_a_redelivered_answer_counts_once_and_is_not_answered_again(fst: FakeStation) -> None:
    rec, prompt = await fst.submit(request_body("s1"))
    answer = fst.text(fst.alice, "1", reply_to=prompt["event_id"])
    await fst.settled(rec.id)
    await until(lambda: fst.edits_of(prompt["event_id"]))
    mark = fst.mark()
    late = fst.text(fst.alice, "3", reply_to=prompt["event_id"])  # a real late answer: told "Already settled"
    await until(lambda: fst.notices(mark, contains="Already settled"))
    again = [e for e in fst.hs.events(fst.room) if e["event_id"] in (answer, late)]
    fst.hs.redeliver = [dict(e) for e in again]  # the homeserver sends both again (as after a lost token)
    fst.text(fst.alice, "unrelated chatter")
    await until(lambda: not fst.hs.redeliver, what="the redelivery")
    assert not await fst.pending_after(rec.id, 0.5)
    got = await fst.d.inbox.get(rec.id)
    assert got and got.outcome and got.outcome.option_id == "allow_once"
    assert len(fst.notices(mark, contains="Already settled")) == 1  # the redelivered late answer: not told twice
    assert len(fst.edits_of(prompt["event_id"])) == 1


async def test_answers_given_while_down_apply_once_after_a_restart_with_backfill(fst: FakeStation) -> None:
    recs = [await fst.submit(request_body("s1", tool_call_id=f"c{i}")) for i in range(3)]
    await fst.stop()
    for (_rec, prompt), answer in zip(recs, ["1", "2", "4"], strict=True):
        fst.text(fst.alice, answer, reply_to=prompt["event_id"])
    for i in range(25):  # the next sync is limited: the bot backfills
        fst.text(fst.bob, f"chatter {i}")
    n = fst.hs.count("sync")
    await fst.start()
    for (rec, _p), option in zip(recs, ["allow_once", "allow_always", "reject_always"], strict=True):
        got = await fst.settled(rec.id)
        assert got.outcome and got.outcome.option_id == option
    assert fst.hs.queries("sync")[n].get("since")  # resumed from the saved token
    assert fst.hs.count("messages") >= 1
    await fst.restart()
    for _rec, prompt in recs:
        await until(lambda p=prompt: fst.edits_of(p["event_id"]))
    assert await fst.pending_after(recs[0][0].id, 0.3) is False
    assert all(len(fst.edits_of(p["event_id"])) == 1 for _r, p in recs)
    assert len(fst.prompts_of("s1")) == 3  # nothing posted twice


async def test_a_batch_that_fails_midway_is_handled_again_without_doubling(
    fst: FakeStation, monkeypatch: pytest.MonkeyPatch
) -> None:
    r1, p1 = await fst.submit(request_body("s1", tool_call_id="c1"))
    r2, p2 = await fst.submit(request_body("s2", tool_call_id="c2"))
    inbox = fst.d.inbox
    real_settle = inbox.settle
    calls: list[str] = []

    async def flaky_settle(request_id: str, how: Any) -> Any:
        calls.append(request_id)
        if request_id == r2.id and calls.count(r2.id) == 1:
            raise sqlite3.OperationalError("disk I/O error")  # the disk fails after r1's answer was settled
        return await real_settle(request_id, how)

    monkeypatch.setattr(inbox, "settle", flaky_settle)
    mark = fst.mark()
    fst.text(fst.alice, "1", reply_to=p1["event_id"])
    fst.text(fst.alice, "4", reply_to=p2["event_id"])  # one batch: r1 then r2
    got1, got2 = await fst.settled(r1.id), await fst.settled(r2.id)
    assert got1.outcome and got1.outcome.option_id == "allow_once"
    assert got2.outcome and got2.outcome.option_id == "reject_always"
    assert calls.count(r2.id) == 2  # the batch came again
    await until(lambda: fst.edits_of(p1["event_id"]) and fst.edits_of(p2["event_id"]))
    assert await fst.pending_after(r1.id, 0.3) is False
    assert not fst.notices(mark, contains="Already settled")  # r1's answer, seen again, was not "late"
    assert len(fst.edits_of(p1["event_id"])) == 1 and len(fst.edits_of(p2["event_id"])) == 1


async def test_the_filter_is_kept_across_restarts_and_answers_still_work(fst: FakeStation) -> None:
    await fst.restart()
    assert fst.hs.count("filter") == 1
    rec, prompt = await fst.submit(request_body("s1"))
    fst.text(fst.alice, "1", reply_to=prompt["event_id"])
    assert (await fst.settled(rec.id)).outcome is not None


async def test_a_structured_answer_counts_and_a_stale_one_is_refused(fst: FakeStation) -> None:
    rec, _prompt = await fst.submit(request_body("s1"))
    mark = fst.mark()
    stale = {"request_id": rec.id, "option_id": "allow_once", "subject": {"digest": "0" * 64, "revision": 1}}
    fst.text(fst.alice, "(structured)", extra={"dev.agentpod.permission.answer": stale})
    await until(lambda: fst.notices(mark), what="a notice for the stale answer")
    assert await fst.pending_after(rec.id, 0.2)
    good = {"request_id": rec.id, "option_id": "reject_always",
            "subject": {"digest": rec.digest, "revision": rec.revision}, "feedback": "not today"}
    fst.text(fst.alice, "(structured)", extra={"dev.agentpod.permission.answer": good})
    got = await fst.settled(rec.id)
    assert got.outcome and got.outcome.option_id == "reject_always" and got.outcome.via == "structured"
    assert got.outcome.feedback == "not today"


async def test_edits_are_not_answers_and_an_unparsable_reply_gets_the_answers(fst: FakeStation) -> None:
    rec, prompt = await fst.submit(request_body("s1"))
    ev = fst.text(fst.alice, "hmm, let me look", reply_to=prompt["event_id"])
    mark = fst.mark()
    fst.hs.send_as(fst.alice, fst.room, {
        "msgtype": "m.text", "body": "* 1", "m.new_content": {"msgtype": "m.text", "body": "1"},
        "m.relates_to": {"rel_type": "m.replace", "event_id": ev},
    })
    fst.text(fst.alice, "approve?", reply_to=prompt["event_id"])  # one word, no option: the valid answers
    notice = (await until(lambda: fst.notices(mark), what="the valid answers"))[0]
    assert "Allow once" in content(notice)["body"]
    assert await fst.pending_after(rec.id, 0.2)


async def test_the_first_answer_wins_and_a_late_one_is_told_in_the_thread(fst: FakeStation) -> None:
    rec, prompt = await fst.submit(request_body("s1"))
    fst.text(fst.alice, "1", reply_to=prompt["event_id"])
    await fst.settled(rec.id)
    mark = fst.mark()
    fst.text(fst.alice, "3", reply_to=prompt["event_id"])
    notice = (await until(lambda: fst.notices(mark, contains="Already settled")))[0]
    assert "Allow once" in content(notice)["body"]
    assert rel(notice).get("rel_type") == "m.thread" and rel(notice).get("event_id") == prompt["event_id"]
    got = await fst.d.inbox.get(rec.id)
    assert got and got.outcome and got.outcome.option_id == "allow_once"


async def test_a_revoked_token_logs_in_again_keeping_the_inbox(fst: FakeStation) -> None:
    rec, prompt = await fst.submit(request_body("s1"))
    old = set(fst.hs.tokens)
    fst.hs.tokens.clear()  # the homeserver forgot every access token (e.g. an admin logged the bot out)
    await until(lambda: fst.hs.tokens, what="a new log-in")
    assert not set(fst.hs.tokens) & old
    fst.text(fst.alice, "2", reply_to=prompt["event_id"])
    got = await fst.settled(rec.id)
    assert got.outcome and got.outcome.option_id == "allow_always"
    await until(lambda: fst.edits_of(prompt["event_id"]), what="the edit, sent with the new token")


async def test_a_revoked_token_without_a_password_stops_the_daemon_with_code_1(fst: FakeStation) -> None:
    await fst.stop()
    fst.hs.tokens["tok-given"] = (fst.bot, "DEVGIVEN")
    fst.matrix_extra = {"password": None, "access_token": "tok-given"}
    shutil.rmtree(fst.state)  # no saved session: the configured token is used
    await fst.start()
    fst.hs.tokens.clear()
    assert await fst.exited() == 1


async def test_failing_sends_back_off_and_the_prompt_is_posted_once(fst: FakeStation) -> None:
    fst.hs.fail("send", times=3, status=502)
    rec, prompt = await fst.submit(request_body("s1"))
    assert len(fst.prompts_of("s1")) == 1 and fst.hs.count("send") >= 4
    fst.text(fst.alice, "1", reply_to=prompt["event_id"])
    assert (await fst.settled(rec.id)).outcome is not None


async def test_a_prompt_refused_as_too_large_goes_out_short(fst: FakeStation) -> None:
    fst.hs.fail("send", times=1, status=413, errcode="M_TOO_LARGE")
    rec, prompt = await fst.submit(request_body("s1"))
    assert "too large to show here" in content(prompt)["body"]
    fst.text(fst.alice, "2", reply_to=prompt["event_id"])
    got = await fst.settled(rec.id)
    assert got.outcome and got.outcome.option_id == "allow_always"


async def test_rule_settled_requests_are_never_posted_when_post_rule_settled_is_off(fst: FakeStation) -> None:
    """Many requests at once, half settled by a config rule: the poster, busy with the other half, never
    posts a rule-settled one (it is held from the poster until its rules are applied)."""
    fst.rules = [{"match": {"toolName": "Read*"}, "decision": "approve"}]
    fst.prompts["post_rule_settled"] = False
    await fst.restart()
    bodies = []
    for i in range(40):
        body = request_body(f"r{i}", tool_call_id=f"c{i}")
        if i % 2 == 0:
            body["toolCall"]["_meta"] = {"claudeCode": {"toolName": "Read"}}
        bodies.append(body)
    got = await asyncio.gather(*(fst.d.submit(b, "api.token") for b in bodies))
    ruled = {rec.session_id for rec, _ in got if rec.outcome is not None}
    asked = {rec.session_id for rec, _ in got if rec.pending}
    assert len(ruled) == 20 and len(asked) == 20
    await until(lambda: all(fst.prompts_of(s) for s in asked), what="the other half posted")
    assert [s for s in sorted(ruled) if fst.prompts_of(s)] == []
    for s in ruled:
        rec = await fst.d.inbox.get(f"{s}:1")
        assert rec is not None and rec.prompt_event_id is None



async def test_a_term_that_ends_rebuilds_the_matrix_side_in_process(
    fst: FakeStation, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The term ends under the running Matrix side (here: one fenced write refused): the daemon does not exit;
    its old client is closed, a new Matrix side (client, sync position read again, outbox) is built, and
    the next term posts and settles what is pending exactly once (issue 36)."""
    d = fst.d
    old_matrix, old_outbox = d.matrix, d.outbox
    rec, prompt = await fst.submit(request_body("s1"))
    real = d.inbox.take_parked
    deposed = []

    async def refused_once() -> list[Any]:
        if not deposed:
            deposed.append(1)
            raise Deposed("term 1 is over (now 2)")
        return await real()

    monkeypatch.setattr(d.inbox, "take_parked", refused_once)
    old_outbox.wake_post.set()
    await until(lambda: d.matrix is not old_matrix and d.ready and d.matrix.syncer.synced.is_set(),
                what="a new Matrix side, logged in and synced")
    assert fst._run is not None and not fst._run.done()
    assert old_matrix.client.client_session is None  # the old term's HTTP session is closed
    assert d.outbox is not old_outbox and d.outbox.matrix is d.matrix and d.rooms.matrix is d.matrix
    assert d.room_figures.rooms is d.rooms
    rec2, prompt2 = await fst.submit(request_body("s1", tool_call_id="c2"))  # posted by the new side
    fst.text(fst.alice, "1", reply_to=prompt["event_id"])  # the prompt of the old term, answered now
    fst.text(fst.alice, "1", reply_to=prompt2["event_id"])
    for r, p in ((rec, prompt), (rec2, prompt2)):
        got = await fst.settled(r.id)
        assert got.outcome and got.outcome.option_id == "allow_once"
        await until(lambda p=p: fst.edits_of(p["event_id"]), what="the settled edit")  # type: ignore[misc]
    await asyncio.sleep(0.3)
    assert len(fst.prompts_of("s1")) == 2
    assert all(len(fst.edits_of(p["event_id"])) == 1 for p in (prompt, prompt2))
