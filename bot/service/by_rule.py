"""A new request settled by a rule before anyone is asked: the config's rules first (a deny there wins), then
the session's own rules (one a person set in the room, in the same room). Until then the request is held
back from the poster; it may be posted after (a rule-settled one only with ``prompts.post_rule_settled``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from bot.config import Config
from bot.events.kinds import Kind
from bot.events.states import Via
from bot.inbox.decisions import NoFittingOption, choose
from bot.inbox.record import Record, Settlement
from bot.inbox.session_rule_store import SessionRules
from bot.inbox.session_rules import facts, scope_of
from bot.inbox.store import Inbox

log = structlog.get_logger("daemon")


class ByRule:
    """Applies the rules to each new request (:meth:`apply`); ``session_rules`` and ``posted`` reach the
    Matrix side of now (the daemon builds a new one each term)."""

    def __init__(
        self,
        cfg: Config,
        inbox: Inbox,
        now: Callable[[], float],
        session_rules: Callable[[], SessionRules],
        posted: Callable[[], None],
    ) -> None:
        self.cfg, self.inbox, self.now = cfg, inbox, now
        self.session_rules, self.posted = session_rules, posted
        self.rules: list[Any] = []
        if cfg.rules:
            from bot.inbox.rules import parse_rules

            self.rules = parse_rules(list(cfg.rules))

    async def apply(self, rec: Record) -> Record:
        """The request after the rules (settled, or needing approvals, or as it was); then released to post."""
        try:
            return await self._apply_held(rec)
        finally:
            await self.inbox.release_post(rec.id)
            self.posted()

    async def _apply_held(self, rec: Record) -> Record:
        from bot.inbox.rules import decide

        rule = decide(self.rules, rec.to_api()) if self.rules else None
        if rule is not None and rec.kind == Kind.QUESTION and rule.decision != "deny":
            log.info("rule_not_applicable", request_id=rec.id, reason="a rule never answers a question")
            rule = None
        if rule is None:
            return await self._apply_session_rules(rec)
        if rule.decision == "ask":  # a person decides (no session rule skips it): maybe several people
            users = rule.answerers.users if rule.answerers is not None else None
            log.info("request_needs_approvals", request_id=rec.id, approvals=rule.approvals or 1)
            return await self.inbox.require(rec.id, rule.approvals or 1, users) or rec
        try:
            exact = None if rec.kind == Kind.QUESTION else rule.option_id  # a question's deny: decline, no choice
            option = choose(rec.options, rule.decision, scope=rule.scope, option_id=exact)
        except NoFittingOption as e:
            log.warning("rule_not_applicable", request_id=rec.id, reason=str(e))
            return rec
        return await self._settle(rec, option, "rule", f"rule:{self.rules.index(rule) + 1}")

    async def _apply_session_rules(self, rec: Record) -> Record:
        scope = scope_of(facts(rec))
        once = [str(o["optionId"]) for o in rec.options if o.get("kind") == "allow_once"]
        if scope is None:
            return rec
        rule = await self.session_rules().match(scope, self.now())  # also: the session is active
        if rule is None or not once:
            return rec
        origin = await self.inbox.get(rule.request_id)
        if origin is None or origin.room != rec.room:  # a rule stays in its room: another room's answerers
            return rec
        log.info("session_rule_matched", rule_id=rule.id, request_id=rec.id)
        return await self._settle(rec, once[0], f"session rule (set by {rule.set_by})", f"rule:session:{rule.set_by}")

    async def _settle(self, rec: Record, option: str | None, by: str, ledger_by: str) -> Record:
        settled = await self.inbox.settle(rec.id, Settlement(option, by, Via.RULE, self.now(), ledger_by=[ledger_by]))
        if settled is None:
            return rec
        if not self.cfg.prompts.post_rule_settled:
            await self.inbox.skip_post(rec.id)
        log.info("request_settled_by_rule", request_id=rec.id, option_id=option, by=by)
        return settled
