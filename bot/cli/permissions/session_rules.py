"""`permission-bot permissions rules [--session ID] [--json]` and `... rules revoke RULE_ID`.

The session rules an answerer set with ``s`` / 🔁 ("Allow for this session"), over ``GET /rules``
and ``DELETE /rules/{id}``. Stdlib only.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from bot.cli.http import Client
from bot.cli.permissions.render import clean
from bot.cli.permissions.report import Fail, http_message, out
from bot.util.ids import url_segment as quote_id

EMPTY = "no session rules"


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
    if getattr(args, "rules_verb", None) == "revoke":
        status, body = client.call("DELETE", f"/rules/{quote_id(args.rule_id)}")
        if status != 200 or not isinstance(body, dict):
            raise Fail(http_message(status, body, client))
        rule = body.get("revoked") or {}
        out(json.dumps(rule) if args.json else f"revoked session rule {_line(rule)}")
        return 0
    status, body = client.call("GET", "/rules", query={"session": args.session} if args.session else None)
    if status != 200 or not isinstance(body, dict) or not isinstance(body.get("rules"), list):
        raise Fail(http_message(status, body, client))
    rules = [r for r in body["rules"] if isinstance(r, dict)]
    if args.json:
        out(json.dumps(rules))
    elif not rules:
        out(EMPTY + (f" in session {clean(args.session, 80)}" if args.session else ""))
    else:
        out("\n".join(_line(r) for r in rules))
    return 0

