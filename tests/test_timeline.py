"""bot.answers.timeline: plain answers bind to what the sender saw (pure), and the inbox keeps the positions."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.answers.timeline import Bound, Sighting, Unbound, bind, in_view, sighting, withdrawn
from bot.inbox.db import create
from bot.inbox.marks import Mark
from bot.inbox.record import Settlement
from bot.inbox.store import Inbox

BOT = "@permbot:example.org"
BOB = "@bob:example.org"
V2 = {"msgtype": "m.text", "body": "Permission needed: rm -rf /", "suite_event_type": "dev.agentpod.permission.v2",
      "request_id": "s:1"}


def ev(content: dict[str, Any], sender: str = BOT, etype: str = "m.room.message", eid: str = "$e") -> dict[str, Any]:
    return {"type": etype, "sender": sender, "event_id": eid, "content": content}


def edit(rid: str, resolution: bool = True) -> dict[str, Any]:
    new = {**V2, "request_id": rid, **({"resolution": {"state": "resolved"}} if resolution else {})}
    return {"msgtype": "m.text", "body": "* x", "m.new_content": new,
            "m.relates_to": {"rel_type": "m.replace", "event_id": "$p"}}


# --------------------------------------------------------------------------- sighting


def test_the_bots_prompt_and_settled_edit() -> None:
    assert sighting(ev(V2), bot_user_id=BOT) == Sighting("$e", "posted", "s:1")
    assert sighting(ev(edit("s:1")), bot_user_id=BOT) == Sighting("$e", "settled", "s:1")
    assert sighting(ev(edit("s:1", resolution=False)), bot_user_id=BOT) is None
    assert sighting(ev({"msgtype": "m.notice", "body": "Already settled"}), bot_user_id=BOT) is None


def test_anyone_elses_prompt_is_only_a_lookalike() -> None:
    """Fake prompts: not sent by the bot, never a prompt, but they make plain answers ambiguous."""
    for content in (
        V2,
        {"msgtype": "m.text", "body": "hi", "dev.agentpod.permission": {}},
        {"msgtype": "m.text", "body": "PERMISSION NEEDED: deploy"},
        {"msgtype": "m.text", "body": "x", "formatted_body": "<b>Permission needed</b>"},
        edit("s:1"),  # an edit that turns a message into a prompt
    ):
        assert sighting(ev(content, sender=BOB), bot_user_id=BOT) == Sighting("$e", "lookalike")
    assert sighting(ev({"msgtype": "m.text", "body": "1"}, sender=BOB), bot_user_id=BOT) is None


def test_encrypted_events_keep_their_place() -> None:
    assert sighting(ev({"algorithm": "m.megolm.v1.aes-sha2"}, sender=BOB, etype="m.room.encrypted"),
                    bot_user_id=BOT) == Sighting("$e", "answer")


def test_not_marks() -> None:
    for e in (
        {"type": "m.room.member", "sender": BOT, "event_id": "$e", "state_key": BOT, "content": {}},
        ev({**V2, "request_id": 5}),
        {"type": "m.room.message", "sender": BOT, "content": V2},
        "not an event",
        ev(V2, etype="m.reaction"),
    ):
        assert sighting(e, bot_user_id=BOT) is None  # type: ignore[arg-type]


# --------------------------------------------------------------------------- bind


def P(pos: int, rid: str) -> Mark:
    return Mark(pos, "posted", rid)


def S(pos: int, rid: str) -> Mark:
    return Mark(pos, "settled", rid)


def test_the_one_open_prompt_just_above() -> None:
    assert bind([P(1, "a")], 2) == Bound("a")
    assert bind([P(1, "a"), Mark(2, "answer"), Mark(3, "answer")], 4) == Bound("a")


def test_nothing_open_when_written() -> None:
    assert bind([], 1) == Unbound("none")
    assert bind([P(1, "a"), S(2, "a")], 3) == Unbound("none")
    assert bind([P(2, "b")], 1) == Unbound("none")  # posted after the answer: not seen


def test_a_settle_and_a_new_prompt_race_the_answer() -> None:
    """`1` written for A, while A was settled and B (rm -rf) posted."""
    assert bind([P(1, "a"), S(3, "a"), P(4, "b")], 2) == Bound("a")  # A (the daemon then says: already settled)
    assert bind([P(1, "a"), S(2, "a"), P(4, "b")], 3) == Unbound("none")  # B not posted yet
    assert bind([P(1, "a"), P(2, "b"), S(4, "a")], 3) == Unbound("several")
    assert bind([P(1, "a"), P(2, "b"), S(3, "a")], 4) == Unbound("moved")  # A's settle after B's posting
    assert bind([P(1, "a"), S(2, "a"), P(3, "b")], 4) == Bound("b")  # the sender saw B, and only B


def test_a_lookalike_after_the_prompt() -> None:
    assert bind([P(1, "a"), Mark(2, "lookalike")], 3) == Unbound("moved")
    assert bind([Mark(1, "lookalike"), P(2, "a")], 3) == Bound("a")


def test_an_older_settle_after_the_prompt() -> None:
    assert bind([P(1, "z"), P(2, "a"), S(3, "z")], 4) == Unbound("moved")


def test_a_room_answer_settles_its_prompt_where_it_sits() -> None:
    """A's answer (2) settled it; B was posted (3) before A's edit (4): a `1` after B binds to B."""
    assert bind([P(1, "a"), S(2, "a"), P(3, "b"), S(4, "a")], 5) == Bound("b")
    assert bind([P(1, "a"), S(2, "a"), P(3, "b")], 4) == Bound("b")  # the edit not in the room yet
    assert bind([P(1, "a"), S(2, "a"), P(3, "b"), S(4, "a"), Mark(5, "lookalike")], 6) == Unbound("moved")
    assert bind([P(1, "a"), S(2, "a"), P(3, "b"), S(4, "a"), S(5, "b")], 6) == Unbound("none")


def test_an_api_settle_still_needs_its_edit() -> None:
    """Settled outside the room (API, timeout...): nothing shows it until its edit, wherever that lands."""
    assert bind([P(1, "a"), P(2, "b")], 3) == Unbound("several")  # A's edit not in the room yet
    assert bind([P(1, "a"), P(2, "b"), S(3, "a")], 4) == Unbound("moved")  # the edit after B: ask
    assert bind([P(1, "a"), S(2, "a"), P(3, "b")], 4) == Bound("b")  # the edit before B


def test_a_room_answer_after_the_next_prompt_moves_it() -> None:
    """A reply settling A after B was posted is a change above B: a plain `1` after it is asked about."""
    assert bind([P(1, "a"), P(2, "b"), S(3, "a")], 4) == Unbound("moved")
    assert bind([P(1, "a"), P(2, "b"), S(3, "a"), S(4, "a")], 5) == Unbound("moved")


def test_only_answers_seen_where_they_sit_mark() -> None:
    thread = {"msgtype": "m.text", "body": "1", "m.relates_to": {"rel_type": "m.thread", "event_id": "$p"}}
    reply = {"msgtype": "m.text", "body": "1", "m.relates_to": {"m.in_reply_to": {"event_id": "$p"}}}
    reaction = {"m.relates_to": {"rel_type": "m.annotation", "event_id": "$p", "key": "1\ufe0f\u20e3"}}
    assert not in_view(ev(thread, sender=BOB))
    assert in_view(ev(reply, sender=BOB)) and in_view(ev({"msgtype": "m.text", "body": "1"}, sender=BOB))
    assert in_view(ev(reaction, sender=BOB, etype="m.reaction"))


EVENTS = st.lists(
    st.tuples(st.sampled_from(["posted", "settled", "lookalike", "answer"]), st.sampled_from(["a", "b", "c"])),
    max_size=14,
)


def _reference(seq: list[tuple[str, str]], at: int) -> str | None:
    """The rule as the contract words it, walked over the room as a person would read it."""
    shown = seq[:at]
    posted = {r for k, r in shown if k == "posted"}
    settled = {r for k, r in shown if k == "settled"}
    open_ = posted - settled
    if len(open_) != 1:
        return None
    (rid,) = open_
    last_post = max(i for i, (k, r) in enumerate(shown) if k == "posted" and r == rid)
    # A request settled again (its edit after the answer that settled it) changes nothing a reader sees pending.
    first_settle = {r: min(i for i, (k, x) in enumerate(shown) if k == "settled" and x == r) for r in settled}
    between = [k for i, (k, r) in enumerate(shown[last_post + 1 :], start=last_post + 1)
               if k != "answer" and not (k == "settled" and first_settle[r] < i)]
    return None if between else rid


def _marks(seq: list[tuple[str, str]]) -> list[Mark]:
    return [Mark(i, k, r if k in ("posted", "settled") else None) for i, (k, r) in enumerate(seq)]  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(EVENTS, st.data())
def test_bind_follows_the_rule(seq: list[tuple[str, str]], data: st.DataObject) -> None:
    at = data.draw(st.integers(0, len(seq)))
    got = bind(_marks(seq), at)
    want = _reference(seq, at)
    assert (got == Bound(want)) if want else isinstance(got, Unbound)
    # Nothing that comes later in the room changes what an answer at ``at`` binds to.
    assert bind(_marks(seq)[:at], at) == got


# --------------------------------------------------------------------------- the inbox keeps them


async def test_positions_survive_a_restart_and_redelivery(engine_url: str) -> None:
    ib = Inbox(create(engine_url))
    await ib.open()
    a = await ib.place("$pa", "posted", "a")
    one = await ib.place("$one", "answer")
    await ib.close()
    ib = Inbox(create(engine_url))
    await ib.open()
    try:
        b = await ib.place("$pb", "posted", "b")  # B is posted after the `1`...
        assert await ib.place("$one", "answer") == one  # ...which, redelivered, keeps its place
        assert await ib.place("$pa", "posted", "a") == a
        assert a < one < b
        assert bind(await ib.marks_before(one), one) == Bound("a")
        late = await ib.place("$late", "answer")
        assert bind(await ib.marks_before(late), late) == Unbound("several")
        # an event reserved while still encrypted takes its kind when decrypted, keeping its place
        enc = await ib.place("$enc", "answer")
        assert await ib.place("$enc", "settled", "a") == enc
        after = await ib.place("$after", "answer")
        assert bind(await ib.marks_before(after), after) == Unbound("moved")
    finally:
        await ib.close()


@settings(max_examples=30, deadline=None)
@given(EVENTS)
def test_the_inbox_gives_bind_what_it_needs(seq: list[tuple[str, str]]) -> None:
    """``marks_before`` (a bounded query) gives bind the same answer as the whole timeline would."""

    async def run(path: Path) -> None:
        ib = Inbox(path)
        await ib.open()
        try:
            full = []
            for i, (kind, rid) in enumerate(seq):
                r = rid if kind in ("posted", "settled") else None
                full.append(Mark(await ib.place(f"$e{i}", kind, r), kind, r))  # type: ignore[arg-type]
            for m in full:
                assert bind(await ib.marks_before(m.pos), m.pos) == bind(full, m.pos)
        finally:
            await ib.close()

    with tempfile.TemporaryDirectory() as d:
        asyncio.run(run(Path(d) / "inbox.sqlite3"))


async def test_a_room_answer_marks_its_prompt_settled_in_the_inbox(inbox: Inbox) -> None:
    """The answer's own place becomes A's settled mark, in the settle's transaction; A's edit, later than B's
    posting, then counts for nothing; an answer in a thread marks nothing."""
    from bot.inbox.submission import parse_submission
    from tests.support.station import request_body

    a, _ = await inbox.submit(parse_submission(request_body("s")), 1.0, 60)
    b, _ = await inbox.submit(parse_submission(request_body("s", tool_call_id="c2")), 1.0, 60)
    await inbox.place("$pa", "posted", a.id)
    one = await inbox.place("$one", "answer")
    await inbox.settle(a.id, Settlement(option_id="allow_once", by="@a:hs", via="matrix", now=2.0,
                       event_id="$one", in_view=True))
    await inbox.set_prompt_event(a.id, "$pa")
    await inbox.set_prompt_event(b.id, "$pb")
    assert [r.id for r in await inbox.needing_edit(shown=True)] == [a.id]
    assert await inbox.place("$one", "answer") == one  # redelivered: same place, still the settled mark
    await inbox.place("$pb", "posted", b.id)
    two = await inbox.place("$two", "answer")
    assert bind(await inbox.marks_before(two), two) == Bound(b.id)
    await inbox.place("$ea", "settled", a.id)  # A's edit, after B's prompt
    three = await inbox.place("$three", "answer")
    assert bind(await inbox.marks_before(three), three) == Bound(b.id)
    await inbox.settle(b.id, Settlement(option_id="allow_once", by="@a:hs", via="matrix", now=3.0,
                       event_id="$thread"))  # not in view: nothing marks it until its edit
    assert [r.id for r in await inbox.needing_edit(shown=True)] == [a.id]
    assert [r.id for r in await inbox.needing_edit(shown=False)] == [b.id]
    c, _ = await inbox.submit(parse_submission(request_body("s", tool_call_id="c3")), 1.0, 60)
    await inbox.place("$pc", "posted", c.id)
    await inbox.settle(c.id, Settlement(option_id="allow_once", by="@a:hs", via="matrix", now=4.0,
                       event_id="$reply", in_view=True))  # a reply, never placed: it sits at the next place
    four = await inbox.place("$four", "answer")
    assert await inbox.place("$reply", "answer") < four
    assert bind(await inbox.marks_before(four), four) == Unbound("moved")  # C settled after B: ask


async def test_a_redacted_answer_no_longer_shows_its_prompt_settled(inbox: Inbox) -> None:
    """alice's `1` settled A; B is posted; the `1` is redacted: A looks pending again (until its edit), and the
    redaction is a change above B, so a plain `1` after it is asked about."""
    from bot.inbox.submission import parse_submission
    from tests.support.station import request_body

    a, _ = await inbox.submit(parse_submission(request_body("s")), 1.0, 60)
    await inbox.place("$pa", "posted", a.id)
    await inbox.place("$one", "answer")
    await inbox.settle(a.id, Settlement(option_id="allow_once", by="@a:hs", via="matrix", now=2.0,
                       event_id="$one", in_view=True))
    await inbox.place("$pb", "posted", "b")
    before = await inbox.place("$x", "answer")
    assert bind(await inbox.marks_before(before), before) == Bound("b")
    assert await inbox.unmark("$chat", "@a:hs", "$r0") is None  # not a mark: nothing changes
    assert await inbox.unmark("$one", "@bob:hs", "$r1") is None  # not hers to take back: nothing changes
    before = await inbox.place("$x2", "answer")
    assert bind(await inbox.marks_before(before), before) == Bound("b")
    assert await inbox.unmark("$one", "@a:hs", "$r2") == a.id
    after = await inbox.place("$y", "answer")
    assert bind(await inbox.marks_before(after), after) == Unbound("several")
    await inbox.place("$ea", "settled", a.id)  # A's edit: A settled again, after B's posting
    last = await inbox.place("$z", "answer")
    assert bind(await inbox.marks_before(last), last) == Unbound("moved")


def test_redactions_and_edits_name_what_they_take_out() -> None:
    assert withdrawn({"type": "m.room.redaction", "redacts": "$a", "content": {}}, bot_user_id=BOT) == "$a"
    assert withdrawn({"type": "m.room.redaction", "content": {"redacts": "$b"}}, bot_user_id=BOT) == "$b"  # v11
    assert withdrawn({"type": "m.room.redaction", "content": {}}, bot_user_id=BOT) is None
    fixed = {"msgtype": "m.text", "body": "* never mind", "m.new_content": {"msgtype": "m.text", "body": "never mind"},
             "m.relates_to": {"rel_type": "m.replace", "event_id": "$one"}}
    assert withdrawn(ev(fixed, sender=BOB), bot_user_id=BOT) == "$one"
    assert withdrawn(ev(edit("s:1")), bot_user_id=BOT) is None  # the bot's own settled edit takes nothing out
    assert withdrawn(ev({"msgtype": "m.text", "body": "1"}, sender=BOB), bot_user_id=BOT) is None


async def test_old_chat_positions_are_pruned_but_prompts_kept(inbox: Inbox, monkeypatch: Any) -> None:
    monkeypatch.setattr("bot.inbox.marks.ANSWERS_KEPT", 10)
    a = await inbox.place("$pa", "posted", "a")
    first = await inbox.place("$chat0", "answer")
    for i in range(1, 1000):
        await inbox.place(f"$chat{i}", "answer")
    assert await inbox.place("$chat0", "answer") > first  # forgotten: it would get a new place
    assert await inbox.place("$pa", "posted", "a") == a


def test_a_reply_quoting_a_prompt_counts_as_a_lookalike() -> None:
    """A client shows a reply with the event it replies to, which may itself be a fake prompt: the quote counts."""
    quoted = {"msgtype": "m.text", "body": f"> <{BOT}> Permission needed: rm -rf /\n\n1",
              "format": "org.matrix.custom.html",
              "formatted_body": "<mx-reply><blockquote>Permission needed: rm</blockquote></mx-reply>1",
              "m.relates_to": {"m.in_reply_to": {"event_id": "$p"}}}
    assert sighting(ev(quoted, sender=BOB), bot_user_id=BOT) == Sighting("$e", "lookalike")
    assert sighting(ev({"msgtype": "m.text", "body": "lgtm", "m.relates_to": {"m.in_reply_to": {"event_id": "$p"}}},
                       sender=BOB), bot_user_id=BOT) is None


def test_lookalikes_in_every_form_a_reader_sees() -> None:
    """Notices, emotes, thread messages, edits (by their new text), stickers and polls from anyone else."""
    fake = "P\u0435rmission needed: ls"
    thread = {"rel_type": "m.thread", "event_id": "$root"}
    for etype, content in (
        ("m.room.message", {"msgtype": "m.notice", "body": fake}),
        ("m.room.message", {"msgtype": "m.emote", "body": fake}),
        ("m.room.message", {"msgtype": "m.text", "body": fake, "m.relates_to": thread}),
        ("m.room.message", {"msgtype": "m.text", "body": "* hi", "m.new_content": {"msgtype": "m.text", "body": fake},
                            "m.relates_to": {"rel_type": "m.replace", "event_id": "$x"}}),
        ("m.room.message", {"msgtype": "m.text", "body": "hi", "formatted_body": "Permission <span></span>needed"}),
        ("m.sticker", {"body": fake, "url": "mxc://x/y"}),
        ("org.matrix.msc3381.poll.start", {"body": "lunch?"}),
        ("m.poll.start", {}),
    ):
        assert sighting(ev(content, sender=BOB, etype=etype), bot_user_id=BOT) == Sighting("$e", "lookalike"), content
    assert sighting(ev({"msgtype": "m.notice", "body": "build green"}, sender=BOB), bot_user_id=BOT) is None
    assert sighting(ev({"body": "cat", "url": "mxc://x/y"}, sender=BOB, etype="m.sticker"), bot_user_id=BOT) is None


async def test_the_bots_own_events_are_known_by_their_ids(inbox: Inbox) -> None:
    """A new device cannot decrypt what an earlier one sent: the prompt and the edit are still found."""
    from bot.inbox.submission import parse_submission
    from tests.support.station import request_body

    rec, _ = await inbox.submit(parse_submission(request_body("s")), 1.0, 60)
    await inbox.set_prompt_event(rec.id, "$prompt", 2.0)
    await inbox.settle(rec.id, Settlement(option_id="allow_once", by="@a:hs", via="matrix", now=3.0))
    await inbox.mark_edited(rec.id, "$edit")
    assert await inbox.own_event("$prompt") == ("posted", rec.id)
    assert await inbox.own_event("$edit") == ("settled", rec.id)
    assert await inbox.own_event("$other") is None
