"""The `permissions` command line: ls, approve, deny, watch and rules, each with --url/--token-file."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from bot.cli.permissions import session_rules, submit
from bot.util.durations import DurationError, parse_duration


class _ToolRule(argparse.Action):
    """``--allow-tool``/``--deny-tool``: append ``(decision, pattern)`` to one list, keeping their order."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        items = list(getattr(namespace, self.dest, None) or [])
        items.append((self.const, values))
        setattr(namespace, self.dest, items)


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except DurationError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _interval(text: str) -> float:
    v = _duration(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be more than zero (got {text!r})")
    return v

def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the subcommands ls/approve/deny/watch (each with --url/--token) to ``p``."""
    conn = argparse.ArgumentParser(add_help=False)
    g = conn.add_argument_group("daemon")
    g.add_argument("--url", metavar="URL", help="the daemon's API (env PERMISSION_BOT_URL; http://127.0.0.1:8750)")
    g.add_argument("--token-file", metavar="PATH", help="a file holding the API token (else env PERMISSION_BOT_TOKEN)")
    g.add_argument("--token", metavar="TOKEN", help="deprecated: the token in argv, readable by any local process")
    sub = p.add_subparsers(dest="perm_verb", metavar="{ls,approve,deny,answer,submit,watch,rules}", required=True)

    ls = sub.add_parser(
        "ls",
        parents=[conn],
        help="list pending requests, oldest first",
        description="List every pending permission request across sessions, oldest first.",
    )
    ls.add_argument("--json", action="store_true", help="print the full records as a JSON array")
    ls.add_argument("--session", metavar="ID", help="only this session (its id or label)")
    ls.add_argument("--room", metavar="NAME", help="only this station room's requests ([[rooms]] name, or default)")

    for verb in ("approve", "deny"):
        what = (
            "Approve: allow-once, or allow-always with --always"
            if verb == "approve"
            else "Deny: a reject option, or cancel the request when none is offered"
        )
        v = sub.add_parser(verb, parents=[conn], help=f"{verb} one request", description=f"{what}.")
        v.add_argument("id", metavar="ID", help="the request id (see ls)")
        if verb == "approve":
            v.add_argument("--always", action="store_true", help="pick allow-always when it is offered")
        v.add_argument("--option-id", metavar="ID", help="pick exactly this offered option (see ls --json)")
        v.add_argument("--feedback", metavar="TEXT", help="free text attached to the resolution")
        v.add_argument("--json", action="store_true", help="print the resolved record as JSON")

    a = sub.add_parser(
        "answer",
        parents=[conn],
        help="answer one question",
        description="Answer a question an agent asked (a decider token): a choice's number or label, several "
        "(\"1, 3\" or \"Docker, CI\") when the question allows it, or your own words.",
    )
    a.add_argument("id", metavar="ID", help="the question's request id (see ls: marked [question])")
    a.add_argument("answer", metavar="ANSWER", help="a number, a label (or several, comma-separated) or free text")
    a.add_argument("--json", action="store_true", help="print the answered record as JSON")

    w = sub.add_parser(
        "watch",
        parents=[conn],
        help="auto-resolve requests that match rules",
        description="Poll the inbox and resolve requests that match explicit rules; deny rules win. "
        "Anything unmatched stays pending. Needs at least one rule.",
    )
    w.add_argument(
        "--allow-tool",
        dest="tool_rules",
        action=_ToolRule,
        const="approve",
        metavar="PAT",
        help="approve tools whose harness tool name matches this glob (case-sensitive; never the title); repeatable",
    )
    w.add_argument(
        "--deny-tool",
        dest="tool_rules",
        action=_ToolRule,
        const="deny",
        metavar="PAT",
        help="deny tools matching this glob; repeatable; wins over any allow rule",
    )
    w.add_argument("--session", metavar="ID", help="restrict every rule to this session id (chosen by the agent)")
    w.add_argument("--label", metavar="NAME", help="restrict every rule to requests with this label (set by the proxy)")
    w.add_argument("--room", metavar="NAME", help="restrict every rule to this station room's requests")
    w.add_argument("--rules-json", metavar="JSON|@FILE", help="a JSON list of rules, or @FILE holding one")
    w.add_argument("--always", action="store_true", help="approve rules pick allow-always (if offered)")
    w.add_argument("--interval", type=_interval, default=2.0, metavar="DUR", help="poll period (default 2s)")
    w.add_argument("--timeout", type=_duration, metavar="DUR", help="stop after this long (exit 0)")
    w.add_argument("--once", action="store_true", help="one pass, then exit")
    w.add_argument("--dry-run", action="store_true", help="print what would be done; resolve nothing")
    w.add_argument("--json", action="store_true", help="one JSON object per line")
    session_rules.add_arguments(sub, conn)
    submit.add_arguments(sub, conn)
