"""Room events -> settled requests: the daemon's answer handling over the pure cores.

:mod:`bot.answers.timeline` places the events that matter in the room's order (the bot's prompts and
settled edits, look-alike prompts, plain answers); :mod:`bot.answers` classifies and resolves;
this module looks records up in the inbox in between, checks the sender, settles, and posts the
notices. Events arrive in the order sync delivers them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog

from bot import answers
from bot.answers import timeline
from bot.answers.typed import WAITING_CAP
from bot.config import AnswerersConfig
from bot.events.states import via_words
from bot.events.timestamps import iso_ms
from bot.inbox.quorum import progress
from bot.inbox.record import Record, Settlement
from bot.inbox.session_rule_store import SessionRule, SessionRules
from bot.inbox.session_rules import facts, scope_of
from bot.inbox.store import Inbox
from bot.matrix.client import Matrix
from bot.matrix.notices import Notices
from bot.matrix.room import may_answer
from bot.prompts.meanings import feedback_dropped
from bot.prompts.text import prose
from bot.room.posts import answer_of
from bot.room.targets import as_target, question_answers

log = structlog.get_logger("daemon")


def describe_outcome(rec: Record) -> str:
    """``Allow once, by @alice:hs via reply at 2026-...Z``."""
    o = rec.outcome
    if o is None:
        return "still pending"
    what = prose(rec.option_name(o.option_id) or "") if o.option_id else "cancelled"  # agent text
    if (given := answer_of(rec)) is not None:
        what = f"answered {prose(given, 200)}"
    return f"{what}, by {o.answered_by} via {via_words(o.via)} at {iso_ms(o.decided_at)}"


def rule_notice(rule: SessionRule) -> str:
    """What the room is told when an answer set a session rule (agent text shown as prose)."""
    what = rule.to_api()
    shown = prose(what["command"] if what["command"] is not None else ", ".join(what["paths"]), 200)
    return (
        f"Allowed for the rest of session {prose(rule.scope.session_id, 80)}: {prose(rule.scope.tool, 60)} "
        f"{shown} (exactly this; session rule {rule.id}; revoke: permission-bot permissions rules revoke {rule.id})"
    )


ASK_AMONG = 50
"""A plain answer bound to no prompt is asked about when it answers one of the room's newest this many pending
prompts (the ones near what its sender sees): constant work however many are pending."""

PARKED_ROOM = "_permission_bot_room"
"""Set (always, overwriting) on a parked event's stored copy: the room it came from, for its re-reading."""


class RoomAnswers:
    """Handles one station room's events, one at a time, in timeline order.

    A prompt is answered only in its own room: every lookup (a reply's or reaction's prompt, a structured
    answer's request id, the timeline a plain answer binds in, the pending prompts it may mean) is
    limited to ``room``'s requests, and only ``room``'s answerers (power levels in that room) count."""

    def __init__(
        self, inbox: Inbox, matrix: Matrix, notices: Notices, answerers: AnswerersConfig, now: Callable[[], float],
        wake_post: Callable[[], None], wake_edits: Callable[[], None] = lambda: None, room: str = "default",
    ) -> None:
        self.inbox = inbox
        self.matrix = matrix
        self.notices = notices
        self.answerers = answerers
        self.room = room
        self.room_state = matrix.rooms[room].station.room  # power levels and members of this room
        self.now = now
        self.wake_post = wake_post
        self.wake_edits = wake_edits  # an edit that only it can show now is due at once
        self.session_rules = SessionRules(inbox)

    async def handle(self, source: dict[str, Any]) -> None:
        """One station-room event: a timeline mark, maybe an answer."""
        if await self._withdrawn(source):
            return
        seen = timeline.sighting(source, bot_user_id=self.matrix.user_id)
        if seen is not None:
            kind, rid = seen.kind, seen.request_id
            if kind == "answer" and source.get("sender") == self.matrix.user_id:
                # The bot's own event it cannot decrypt (sent by an earlier device): known by its event id.
                kind, rid = await self.inbox.own_event(seen.event_id) or (kind, rid)
            await self.inbox.place(seen.event_id, kind, rid, room=self.room)
            if kind != "lookalike":
                return  # the bot's own events and still-encrypted ones are never answers
        cand = answers.classify(source, bot_user_id=self.matrix.user_id)  # pure: most events stop here
        if cand is None or await self.inbox.is_handled(cand.event_id):
            return
        target_rec = await self._addressed(cand)
        if target_rec is None and cand.prompt_event_id and await self.inbox.needing_post(limit=1):
            # It may answer a prompt that reached the room before a crash kept its event id:
            # keep it until the outbox has (re)posted, which recovers that id. It keeps its place
            # in the timeline (the settled mark, if it settles one; bot.answers.timeline).
            await self.inbox.place(cand.event_id, "answer", room=self.room)
            await self.inbox.park(cand.event_id, {**source, PARKED_ROOM: self.room}, self.now())
            self.wake_post()
            return
        pending: list[Record] = []
        waiting: int | None = None
        if not cand.explicit:  # a plain message: only the prompt its sender could have meant
            pos = await self.inbox.place(cand.event_id, "answer", room=self.room)
            bound = timeline.bind(await self.inbox.marks_before(pos, self.room), pos)
            if isinstance(bound, timeline.Bound):
                target_rec = self._ours(await self.inbox.get(bound.request_id))
            else:
                log.debug("plain_answer_unbound", event_id=cand.event_id, reason=bound.reason)
            if target_rec is None:  # the bot asks which, if the text answers any of the newest few
                pending = await self.inbox.pending_newest(ASK_AMONG, room=self.room)
                if len(pending) == ASK_AMONG:  # more may wait: counted (up to a bound), never all read
                    waiting = await self.inbox.count_pending_upto(WAITING_CAP, room=self.room)
        verdict = answers.resolve(
            cand, as_target(target_rec) if target_rec else None, [as_target(r) for r in pending], waiting
        )
        if verdict is not None:
            await self._act(cand, verdict, target_rec, in_view=timeline.in_view(source))

    async def refused(self, source: dict[str, Any]) -> None:
        """An event the trust policy kept from :meth:`handle`: never an answer, but a look-alike or a
        redaction still counts (a reader sees it)."""
        if await self._withdrawn(source):
            return
        seen = timeline.sighting(source, bot_user_id=self.matrix.user_id)
        if seen is not None and seen.kind == "lookalike":
            await self.inbox.place(seen.event_id, seen.kind, room=self.room)

    async def _withdrawn(self, source: dict[str, Any]) -> bool:
        """A redaction or an edit: when an answerer takes back the answer that showed a prompt settled, the prompt
        looks pending again until its edit (bot.answers.timeline). True for a redaction (nothing else to do with it)."""
        target, event_id = timeline.withdrawn(source, bot_user_id=self.matrix.user_id), source.get("event_id")
        sender = source.get("sender")
        if target is not None and isinstance(event_id, str) and isinstance(sender, str):
            rid = await self.inbox.unmark(target, sender, event_id)
            if rid is not None:
                log.info("settled_mark_withdrawn", request_id=rid, event_id=target, by=source.get("sender"))
                self.wake_edits()
        return source.get("type") == "m.room.redaction"

    async def _addressed(self, cand: answers.Candidate) -> Record | None:
        """The prompt of this room a reply, thread message, reaction or structured answer addresses
        (another room's prompt is unknown here: ``None``)."""
        if cand.prompt_event_id:  # a structured answer too: it must reply to its own prompt
            return self._ours(await self.inbox.by_prompt_event(cand.prompt_event_id))
        if cand.request_id:
            return self._ours(await self.inbox.get(cand.request_id))
        return None

    def _ours(self, rec: Record | None) -> Record | None:
        """``rec`` when it belongs to this room, else None: another room's request is never answered here."""
        return rec if rec is not None and rec.room == self.room else None

    async def _act(
        self, cand: answers.Candidate, verdict: answers.Answer | answers.Refusal, target_rec: Record | None,
        in_view: bool = False,
    ) -> None:
        event_id, now = cand.event_id, self.now()
        thread_root = target_rec.prompt_event_id if target_rec else None
        if not self._may(cand.sender, target_rec):
            await self.inbox.mark_handled(event_id, now)
            await self._tell_not_answerer(cand.sender, event_id, thread_root)
            log.info("answer_refused", event_id=event_id, sender=cand.sender, reason="not an answerer")
            return
        if isinstance(verdict, answers.Refusal):
            await self.inbox.mark_handled(event_id, now)
            msg = verdict.message
            if verdict.kind == "not_pending" and target_rec is not None:
                msg = f"Already settled: {describe_outcome(target_rec)}."
            self.notices.post(msg, reply_to=event_id, thread_root=thread_root)
            log.info("answer_refused", event_id=event_id, sender=cand.sender, reason=verdict.kind)
            return
        settled = await self.inbox.settle(verdict.request_id, Settlement(
            verdict.option_id, verdict.sender, verdict.via, now, verdict.feedback, event_id=event_id,
            in_view=in_view,  # the room shows it settled from here (this event's place, or the next one's)
            **question_answers(target_rec, verdict),  # a question's answers, stored with the outcome
        ))
        if settled is not None and settled.pending:  # one approval of a quorum: counted, or counted already
            await self.inbox.mark_handled(event_id, now)
            again = target_rec is not None and any(a.get("by") == cand.sender for a in target_rec.approvals)
            line = progress(settled.approvals_needed, settled.approvals)
            self.notices.post(f"You approved this already. {line}." if again else f"Approval counted. {line}.",
                              reply_to=event_id, thread_root=thread_root)
            log.info("approval_counted", request_id=settled.id, by=cand.sender, again=again,
                     approvals=len(settled.approvals), needed=settled.approvals_needed)
            return
        if settled is None:
            await self.inbox.mark_handled(event_id, now)
            late = self._ours(await self.inbox.get(verdict.request_id))
            if late is not None:
                self.notices.post(f"Already settled: {describe_outcome(late)}. Your answer changed nothing.",
                                  reply_to=event_id, thread_root=late.prompt_event_id or None)
            return
        await asyncio.sleep(0)  # the long-poll waiting on it answers the agent now, before the rest of this batch
        log.info("request_answered", request_id=settled.id, option_id=verdict.option_id, via=verdict.via,
                 by=verdict.sender)
        agent = feedback_dropped(settled.options, verdict.option_id, tool_name=settled.tool_name or "")
        if verdict.feedback and agent is not None:
            self.notices.post(f"{agent} gets no feedback with this option: your words after the number did not "
                              f"reach it (it ends its turn).", reply_to=event_id, thread_root=thread_root)
        scope = scope_of(facts(settled)) if verdict.session_rule else None
        if scope is not None:  # the sender may answer: checked above, as for every answer
            rule = await self.session_rules.add(scope, set_by=verdict.sender, request_id=settled.id, now=now)
            log.info("session_rule_added", rule_id=rule.id, request_id=settled.id, by=verdict.sender)
            self.notices.post(rule_notice(rule), reply_to=event_id, thread_root=settled.prompt_event_id or None)

    def _may(self, sender: str, rec: Record | None) -> bool:
        """Whether ``sender`` may answer ``rec``: whom it was escalated to; its ask rule's answerers when it
        names them, else the room's."""
        if rec is not None and sender in (rec.escalated_to or []):
            return True
        if rec is not None and rec.approvers is not None:
            return sender in rec.approvers
        return may_answer(
            sender, users=self.answerers.users, min_power_level=self.answerers.min_power_level, room=self.room_state
        )

    async def _tell_not_answerer(self, user: str, event_id: str, thread_root: str | None) -> None:
        # once per person and prompt, never a flood; the room's own key (Station.key)
        key = self.matrix.rooms[self.room].station.key(f"told.not_answerer.{user}.{thread_root or '-'}")
        if await self.inbox.get_kv(key):
            return
        await self.inbox.set_kv(key, iso_ms(self.now()))
        self.notices.post(f"Sorry {user}, you are not on the list of people who may answer permission prompts here, "
                          "so your answer changed nothing.", reply_to=event_id, thread_root=thread_root)
