"""`permission-bot permissions submit --title TEXT [--command CMD] [--wait]`: one request from the command line.

For trying a setup out without an agent (an agent token, as every submitter): the body is what an ACP agent
sends for a shell command (allow once, allow always, reject), so the room shows a real prompt. Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import secrets
from collections.abc import Mapping
from typing import Any

from bot.cli.http import Client
from bot.cli.permissions.render import clean, outcome_text
from bot.cli.permissions.report import Fail, http_message, out
from bot.util.ids import url_segment as quote_id

OPTIONS = [
    {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
]
WAIT_STEP = 60  # seconds per long-poll while --wait


def body(args: argparse.Namespace) -> dict[str, Any]:
    """The ACP ``session/request_permission`` params submitted."""
    call: dict[str, Any] = {"toolCallId": "call-" + secrets.token_hex(4), "title": args.title, "kind": "execute"}
    if args.shell_command is not None:
        call["rawInput"] = {"command": args.shell_command}
    return {"sessionId": args.session or "cli-" + secrets.token_hex(4), "toolCall": call, "options": OPTIONS}


def run(args: argparse.Namespace, client: Client) -> int:
    status, rec = client.call("POST", "/permissions", body(args))
    if status not in (200, 201) or not isinstance(rec, Mapping):
        raise Fail(http_message(status, rec, client))
    rid = str(rec.get("id"))
    while args.wait and rec.get("state") == "pending":
        status, got = client.call("GET", f"/permissions/{quote_id(rid)}", query={"wait": str(WAIT_STEP)})
        if status != 200 or not isinstance(got, Mapping):
            raise Fail(http_message(status, got, client))
        rec = got
    if args.json:
        out(json.dumps(rec, indent=2))
    elif not args.wait:
        out(clean(f"submitted {rid}: its prompt is in the room (permissions ls shows it)"))
    else:
        outcome = rec.get("outcome")
        out(clean(f"{rid}: {outcome_text(outcome) if isinstance(outcome, Mapping) else rec.get('state')}"))
    allowed = str(((rec.get("outcome") or {}).get("option_id")) or "").startswith("allow")
    return 0 if not args.wait or allowed else 1
