"""The `permissions` command line: ls, approve, deny, answer, submit, watch and rules, each with --url/--token-file."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from bot.util.durations import DurationError, parse_duration


def _tool_rule(decision: str) -> Callable[[str], tuple[str, str]]:
    """``--allow-tool``/``--deny-tool``'s type: ``(decision, pattern)``, appended to one list in their order."""
    return lambda pattern: (decision, pattern)


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
    """Add the subcommands ls/approve/deny/answer/submit/watch/rules (each with --url/--token) to ``p``."""
    conn = argparse.ArgumentParser(add_help=False)
    g = conn.add_argument_group("daemon")
    g.add_argument("--url", metavar="URL", help="the daemon's API (env PERMISSION_BOT_URL; http://127.0.0.1:8750)")
    g.add_argument("--token-file", metavar="PATH", help="a file holding the API token (else env PERMISSION_BOT_TOKEN)")
    g.add_argument("--token", metavar="TOKEN", help="deprecated: the token in argv, readable by any local process")
    sub = p.add_subparsers(dest="perm_verb", metavar="{ls,approve,deny,answer,submit,watch,rules}", required=True)

    def verb(name: str, text: str, description: str, under: Any = sub) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = under.add_parser(name, parents=[conn], help=text, description=description)
        return parser

    ls = verb("ls", "list pending requests, oldest first",
              "List every pending permission request across sessions, oldest first.")
    ls.add_argument("--json", action="store_true", help="print the full records as a JSON array")
    ls.add_argument("--session", metavar="ID", help="only this session (its id or label)")
    ls.add_argument("--room", metavar="NAME", help="only this station room's requests ([[rooms]] name, or default)")

    for name, what in (
        ("approve", "Approve: allow-once, or allow-always with --always"),
        ("deny", "Deny: a reject option, or cancel the request when none is offered"),
    ):
        v = verb(name, f"{name} one request", f"{what}.")
        v.add_argument("id", metavar="ID", help="the request id (see ls)")
        if name == "approve":
            v.add_argument("--always", action="store_true", help="pick allow-always when it is offered")
        v.add_argument("--option-id", metavar="ID", help="pick exactly this offered option (see ls --json)")
        v.add_argument("--feedback", metavar="TEXT", help="free text attached to the resolution")
        v.add_argument("--json", action="store_true", help="print the resolved record as JSON")

    a = verb("answer", "answer one question",
             "Answer a question an agent asked (a decider token): a choice's number or label, several "
             "(\"1, 3\" or \"Docker, CI\") when the question allows it, or your own words.")
    a.add_argument("id", metavar="ID", help="the question's request id (see ls: marked [question])")
    a.add_argument("answer", metavar="ANSWER", help="a number, a label (or several, comma-separated) or free text")
    a.add_argument("--json", action="store_true", help="print the answered record as JSON")

    w = verb("watch", "auto-resolve requests that match rules",
             "Poll the inbox and resolve requests that match explicit rules; deny rules win. "
             "Anything unmatched stays pending. Needs at least one rule.")
    for flag, decision, text in (
        ("--allow-tool", "approve",
         "approve tools whose harness tool name matches this glob (case-sensitive; never the title); repeatable"),
        ("--deny-tool", "deny", "deny tools matching this glob; repeatable; wins over any allow rule"),
    ):
        w.add_argument(flag, dest="tool_rules", action="append", type=_tool_rule(decision), metavar="PAT", help=text)
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

    r = verb("rules", "list session rules (set with s or 🔁 in the room); revoke one",
             "List the session rules answerers set with 's' / 🔁: each allows one exact command "
             "(or file) of one tool in one session. 'rules revoke RULE_ID' removes one.")
    r.add_argument("--session", metavar="ID", help="only this session id")
    r.add_argument("--json", action="store_true", help="print the rules as a JSON array")
    rv = verb("revoke", "revoke one session rule", "Revoke one rule.",
              r.add_subparsers(dest="rules_verb", metavar="{revoke}"))
    rv.add_argument("rule_id", metavar="RULE_ID", help="the rule's id (see 'permissions rules')")
    rv.add_argument("--json", action="store_true", help="print the revoked rule as JSON")

    s = verb("submit", "submit one request, to try a setup out (an agent token)",
             "Submit one permission request as an agent would (POST /permissions, an agent token): "
             "its prompt appears in the station room. With --wait, wait for the answer and print it.")
    s.add_argument("--title", required=True, metavar="TEXT", help="what the agent wants to do")
    s.add_argument("--command", dest="shell_command", metavar="CMD",  # not "command": main.py's verb
                   help="the shell command it would run (shown in the prompt)")
    s.add_argument("--session", metavar="ID", help="the session id (default: a new cli-... one)")
    s.add_argument("--wait", action="store_true", help="wait until it is answered; exit 0 allowed, 1 otherwise")
    s.add_argument("--json", action="store_true", help="print the record as JSON")
