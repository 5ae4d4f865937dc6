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
from collections.abc import Sequence

from bot.cli.http import Client, DaemonUnreachable, UsageError, discover
from bot.cli.permissions import session_rules, submit, verbs
from bot.cli.permissions.args import add_arguments
from bot.cli.permissions.report import PROG, Fail, error, quiet_stdout
from bot.util.discovery import warn_argv_token
from bot.util.hide import hide_secrets

__all__ = ["add_arguments", "main", "run"]


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry (``python -m bot.cli.permissions``); the real CLI wires :func:`add_arguments`."""
    p = argparse.ArgumentParser(prog=f"{PROG} permissions")
    add_arguments(p)
    return run(p.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """Run the verb in ``args.perm_verb``; returns the exit code."""
    verb = args.perm_verb
    try:
        if args.token is not None:
            warn_argv_token("permission-bot permissions")
        url, token = discover(args.url, args.token, args.token_file)
        hide_secrets()  # a decider token: not in this process's /proc environ or cmdline for an agent to read
        client = Client(url, token)
        if verb == "ls":
            return verbs.ls(args, client)
        if verb in ("approve", "deny"):
            return verbs.decide(args, client, verb)
        if verb == "answer":
            return verbs.answer(args, client)
        if verb == "watch":
            from bot.cli.permissions.watch import watch

            return watch(args, client)
        if verb == "rules":
            return session_rules.run(args, client)
        if verb == "submit":
            return submit.run(args, client)
        raise Fail(f"unknown permissions verb {verb!r}", 2)
    except UsageError as err:
        return error(str(err), 2)
    except DaemonUnreachable as err:
        return error(str(err), 1)
    except Fail as err:
        return error(str(err), err.code)
    except KeyboardInterrupt:
        return 0 if verb == "watch" else 130
    except BrokenPipeError:
        quiet_stdout()
        return 0
