"""`permission-bot permissions ls|approve|deny|answer|submit|watch|rules`: the human side of the inbox (seed 002).

A thin client over the daemon's HTTP API (docs/design.md), stdlib only so it starts fast;
``bot.inbox.rules`` (pydantic) is imported by ``watch`` alone. Exit codes: 0 done; 1 the daemon said no
(HTTP 404/409/401/...) or cannot be reached; 2 bad command line (argparse, --url, rules).

Parts: args.py (the command line), render.py (terminal-safe text, the ``ls`` table), report.py
(stdout/stderr lines, refusals in words), verbs.py (ls, approve, deny, answer), watch.py (rules at work),
session_rules.py (``rules``, ``rules revoke``), submit.py (``submit``: one request, to try a setup out).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from bot.cli.flags import fail
from bot.cli.http import Client, DaemonUnreachable, UsageError, discover
from bot.cli.permissions import session_rules, submit, verbs, watch
from bot.cli.permissions.args import add_arguments
from bot.cli.permissions.report import Fail, quiet_stdout
from bot.util.discovery import warn_argv_token
from bot.util.hide import hide_secrets

__all__ = ["add_arguments", "run"]

# Each verb (argparse allows no other), called with the command line and the daemon's client.
VERBS: dict[str, Callable[[argparse.Namespace, Client], int]] = {
    "ls": verbs.ls,
    "approve": verbs.decide,
    "deny": verbs.decide,
    "answer": verbs.answer,
    "watch": watch.watch,
    "rules": session_rules.run,
    "submit": submit.run,
}


def run(args: argparse.Namespace) -> int:
    """Run the verb in ``args.perm_verb``; returns the exit code."""
    verb = args.perm_verb
    try:
        if args.token is not None:
            warn_argv_token("permission-bot permissions")
        url, token = discover(args.url, args.token, args.token_file)
        hide_secrets()  # a decider token: not in this process's /proc environ or cmdline for an agent to read
        return VERBS[verb](args, Client(url, token))
    except UsageError as err:
        return fail(str(err), 2)
    except DaemonUnreachable as err:
        return fail(str(err), 1)
    except Fail as err:
        return fail(str(err), err.code)
    except KeyboardInterrupt:
        return 0 if verb == "watch" else 130
    except BrokenPipeError:
        quiet_stdout()
        return 0
