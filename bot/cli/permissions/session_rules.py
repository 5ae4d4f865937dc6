"""`permission-bot permissions rules [--session ID] [--json]` and `... rules revoke RULE_ID`.

The session rules an answerer set with ``s`` / 🔁 ("Allow for this session"), over ``GET /rules``
and ``DELETE /rules/{id}``. Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any

from bot.cli.http import Client
from bot.cli.permissions.render import clean
from bot.cli.permissions.report import Fail, http_message
from bot.util.ids import url_segment as quote_id

EMPTY = "no session rules"


def add_arguments(sub: Any, conn: argparse.ArgumentParser) -> None:
    """Add ``rules`` (and its ``revoke``) to the ``permissions`` subparsers ``sub``."""
    r = sub.add_parser(
        "rules",
        parents=[conn],
        help="list session rules (set with s or 🔁 in the room); revoke one",
        description="List the session rules answerers set with 's' / 🔁: each allows one exact command "
        "(or file) of one tool in one session. 'rules revoke RULE_ID' removes one.",
    )
    r.add_argument("--session", metavar="ID", help="only this session id")
    r.add_argument("--json", action="store_true", help="print the rules as a JSON array")
    rsub = r.add_subparsers(dest="rules_verb", metavar="{revoke}")
    rv = rsub.add_parser("revoke", parents=[conn], help="revoke one session rule", description="Revoke one rule.")
    rv.add_argument("rule_id", metavar="RULE_ID", help="the rule's id (see 'permissions rules')")
    rv.add_argument("--json", action="store_true", help="print the revoked rule as JSON")


def _line(rule: Mapping[str, Any]) -> str:
    what, paths = rule.get("command"), rule.get("paths")
    shown = f"command {clean(what, 200)}" if isinstance(what, str) else f"files {clean(', '.join(paths or []), 200)}"
    if isinstance(rule.get("settings"), dict):
        shown += f" with {clean(json.dumps(rule['settings'], ensure_ascii=False), 120)}"
    return (
        f"{clean(rule.get('id'), 20)}  session {clean(rule.get('session_id'), 60)}"
        f"  tool {clean(rule.get('tool'), 40)}  {shown}  set by {clean(rule.get('set_by'), 60)}"
        f"  last used {clean(rule.get('used_at'), 30)}"
    )


def run(args: argparse.Namespace, client: Client) -> int:
    """List or revoke; an HTTP refusal raises :class:`Fail`."""
    out = sys.stdout
    if getattr(args, "rules_verb", None) == "revoke":
        status, body = client.call("DELETE", f"/rules/{quote_id(args.rule_id)}")
        if status != 200 or not isinstance(body, dict):
            raise Fail(http_message(status, body, client))
        rule = body.get("revoked") or {}
        out.write((json.dumps(rule) if args.json else f"revoked session rule {_line(rule)}") + "\n")
        return 0
    status, body = client.call("GET", "/rules", query={"session": args.session} if args.session else None)
    if status != 200 or not isinstance(body, dict) or not isinstance(body.get("rules"), list):
        raise Fail(http_message(status, body, client))
    rules = [r for r in body["rules"] if isinstance(r, dict)]
    if args.json:
        out.write(json.dumps(rules) + "\n")
    elif not rules:
        out.write(EMPTY + (f" in session {clean(args.session, 80)}" if args.session else "") + "\n")
    else:
        out.write("".join(_line(r) + "\n" for r in rules))
    out.flush()
    return 0

