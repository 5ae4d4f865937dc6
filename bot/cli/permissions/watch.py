"""`permissions watch`: poll the inbox and settle what matches the rules of :mod:`bot.inbox.rules`.

The one rules engine (the daemon's ``[[rules]]`` use it too); deny rules win, anything unmatched
stays pending. Rules load with pydantic, imported only here so that the other verbs start fast.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from bot.cli.http import Client, DaemonUnreachable
from bot.cli.permissions.render import clean, dumps, tool_of
from bot.cli.permissions.report import Fail, http_message, out, warn
from bot.util.ids import url_segment as quote_id

if TYPE_CHECKING:
    from bot.inbox.rules import Rule


class Watcher:
    """One watch process: its rules, the ids it has seen, and how it reports."""

    def __init__(self, args: argparse.Namespace, client: Client, rules: list[Rule]) -> None:
        self.args = args
        self.client = client
        self.rules = rules
        self.seen: set[str] = set()

    def emit(self, result: str, rec: Mapping[str, Any], rule: Rule, n: int, **extra: Any) -> None:
        rid, tool = str(rec.get("id")), tool_of(rec)
        if self.args.json:
            session_id = rec.get("session_id", rec.get("sessionId"))
            out(dumps({"result": result, "id": rid, "session_id": session_id, "tool": tool, "decision": rule.decision,
                       "rule": n, "rule_spec": rule.wire(), "dry_run": bool(self.args.dry_run), **extra}))
            return
        head = f"{rid} ({tool})"
        if result in ("approved", "denied"):
            text = f"{result} {head} by rule {n}"
        elif result.startswith("would_"):
            text = f"would {rule.decision} {head} by rule {n}"
        elif result == "skipped":
            text = f"skipped {head}: HTTP 404, already answered elsewhere"
        else:
            text = f"failed to {rule.decision} {head} by rule {n}: {extra.get('error', '?')}"
        out(clean(text))

    def handle(self, rec: Mapping[str, Any]) -> None:
        """Act on one listed record, at most once per process."""
        from bot.inbox.rules import decide

        rid = rec.get("id")
        if not isinstance(rid, str) or rid in self.seen:
            return
        self.seen.add(rid)
        if rec.get("state", "pending") != "pending":
            return
        rule = decide(self.rules, rec)
        if rule is None or rule.decision == "ask":
            return  # stays pending for ls / approve / deny (an ask rule: a person decides)
        n = next(i for i, r in enumerate(self.rules, 1) if r is rule)
        if self.args.dry_run:
            self.emit(f"would_{rule.decision}", rec, rule, n)
            return
        body: dict[str, Any] = {"decision": rule.decision, "by": "watch"}
        if rule.scope is not None:
            body["scope"] = rule.scope
        if rule.option_id is not None:
            body["option_id"] = rule.option_id
        try:
            status, res = self.client.call("POST", f"/permissions/{quote_id(rid)}", body)
        except DaemonUnreachable as err:
            self.seen.discard(rid)  # nothing was decided; try again on a later pass
            self.emit("failed", rec, rule, n, error=err.reason)
            return
        if status == 200 and isinstance(res, dict):
            got = res.get("outcome")
            outcome: dict[str, Any] = got if isinstance(got, dict) else {}
            done = "approved" if rule.decision == "approve" else "denied"
            self.emit(done, rec, rule, n, option_id=outcome.get("option_id"), state=res.get("state"))
        elif status == 404:
            self.emit("skipped", rec, rule, n, error="HTTP 404: already answered elsewhere")
        elif status == 401:
            raise Fail(http_message(status, res, self.client))
        else:
            self.emit("failed", rec, rule, n, error=http_message(status, res, self.client))


def watch(args: argparse.Namespace, client: Client) -> int:
    """Poll until stopped (``--once``, ``--timeout``, Ctrl-C); a lost daemon is waited for once it has answered."""
    from bot.inbox.rules import RuleError, build_rules

    try:
        rules = build_rules(args.tool_rules or [], args.rules_json, session=args.session, label=args.label,
                            room=args.room, always=args.always)
    except RuleError as err:
        raise Fail(str(err), 2) from None
    if not rules:
        raise Fail("watch needs at least one rule: --allow-tool PAT, --deny-tool PAT or --rules-json (none given)", 2)
    w = Watcher(args, client, rules)
    interval: float = args.interval
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    listed = args.session or args.label
    query = {**({"session": listed} if listed else {}), **({"room": args.room} if args.room else {})} or None
    answered_once = lost = False
    if sys.stderr.isatty():
        print(f"watching {client.url} with {len(rules)} rule(s); Ctrl-C to stop", file=sys.stderr)
    call_timeout = client.timeout
    while True:
        if deadline is not None:  # one call that hangs may not outlast --timeout
            client.timeout = max(0.5, min(call_timeout, deadline - time.monotonic()))
        try:
            status, body = client.call("GET", "/permissions", query=query)
        except DaemonUnreachable as err:
            if not answered_once or args.once:
                raise
            if not lost:
                warn(f"{err} (retrying every {interval:g}s)")
                lost = True
        else:
            answered_once = True
            if lost:
                warn(f"the daemon at {client.url} answers again")
                lost = False
            if status == 200 and isinstance(body, list):
                for rec in body:
                    if isinstance(rec, dict):
                        w.handle(rec)
            elif status == 401:
                raise Fail(http_message(status, body, client))
            else:
                warn(f"listing requests: {http_message(status, body, client)}")
                if args.once:
                    return 1
        if args.once:
            return 0
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            return 0
        time.sleep(interval if deadline is None else min(interval, deadline - now))
