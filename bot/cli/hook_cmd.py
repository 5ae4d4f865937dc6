"""`permission-bot hook claude-code|codex [...]`, `permission-bot hook print-config claude-code|codex` and
`permission-bot hook trust codex [--codex-home DIR]`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import cast

from bot.cli.flags import duration_flag, fail
from bot.hooks.clis import CLIS, Cli
from bot.util.durations import DurationError, parse_duration


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the ``hook`` words and flags."""
    p.add_argument(
        "what",
        choices=[*CLIS, "print-config", "trust"],
        help="the CLI whose hook input is on stdin, print-config, or trust (codex)",
    )
    p.add_argument("target", nargs="?", choices=CLIS, help="with print-config or trust: the CLI to configure")
    p.add_argument("--url", help="the daemon's HTTP API (default: $PERMISSION_BOT_URL, else the default)")
    p.add_argument(
        "--token-file",
        metavar="PATH",
        help="a file holding the agent token (else $PERMISSION_BOT_TOKEN, else ~/.config/permission-bot/agent-token "
        "when it exists); print-config: the path to print (default ~/.config/permission-bot/agent-token)",
    )
    p.add_argument(
        "--fallback",
        choices=("ask", "deny"),
        default="ask",
        help="on any error: print no decision so the CLI asks as usual (default), or print a deny",
    )
    p.add_argument("--connect-timeout", default="5s", metavar="DUR", help="how long to try an unreachable daemon")
    p.add_argument("--prompt-timeout", default="15m", metavar="DUR", help="print-config: the daemon's prompts.timeout")
    p.add_argument("--http", action="store_true", help="print-config: a Claude Code HTTP hook instead of a command")
    p.add_argument("--codex-home", metavar="DIR", help="trust: Codex's home (default $CODEX_HOME or ~/.codex)")


def run(args: argparse.Namespace) -> int:
    """Run the hook, or print its settings."""
    if args.what == "print-config":
        return _print_config(args)
    if args.what == "trust":
        return _trust(args)
    if args.target is not None:
        return fail("unexpected argument after the CLI name", 2, "permission-bot hook")
    from bot.hooks.command import HookArgs, read_input
    from bot.hooks.command import run as run_hook

    try:
        connect = parse_duration(args.connect_timeout)
    except DurationError as e:
        connect = 5.0
        print(f"permission-bot hook: --connect-timeout: {e}; using 5s", file=sys.stderr)
    hargs = HookArgs(cli=cast(Cli, args.what), url=args.url, token_file=args.token_file, fallback=args.fallback,
                     connect_timeout=connect)
    return run_hook(hargs, read_input(sys.stdin.fileno()), sys.stdout, sys.stderr)


def _print_config(args: argparse.Namespace) -> int:
    from bot.hooks.snippet import default_token_file, own_program, running_program, snippet, token_note

    if args.target is None:
        return fail("name the CLI: claude-code or codex", 2, "permission-bot hook print-config")
    timeout = duration_flag("permission-bot hook print-config", "--prompt-timeout", args.prompt_timeout)
    if timeout is None:
        return 2
    if args.http and args.target != "claude-code":
        return fail("--http is for claude-code", 2, "permission-bot hook print-config")
    from bot.util.discovery import discover

    http_url = discover(args.url, None)[0] if args.http else None
    token_file = os.path.abspath(os.path.expanduser(args.token_file or default_token_file(os.environ)))
    program: str | tuple[str, ...] = running_program(sys.argv[0], sys.executable)
    if args.target == "codex":  # Codex runs a hook only once trusted: this install's program, by its path
        program = own_program() or program
    out = snippet(cast(Cli, args.target), prompt_timeout=timeout, token_file=token_file, fallback=args.fallback,
                  http_url=http_url, url=args.url, program=program)
    print(json.dumps(out, indent=2))
    if http_url is None:
        print(token_note(token_file, os.path.isfile(token_file)), file=sys.stderr)
    return 0


def _trust(args: argparse.Namespace) -> int:
    from bot.hooks.codex_trust import Ours, TrustError, codex_home, trust
    from bot.hooks.snippet import own_program
    from bot.util.discovery import discover

    if args.target != "codex":
        return fail("only codex needs it: permission-bot hook trust codex", 2, "permission-bot hook trust")
    program = own_program()
    if program is None:
        return fail("cannot find this install's permission-bot program", 1, "permission-bot hook trust")
    home = codex_home(args.codex_home, os.environ)
    try:
        done, refused = trust(home, Ours(program, discover(args.url, None)[0]))
    except TrustError as e:
        return fail(str(e), 1, "permission-bot hook trust")
    for key, why in refused:
        print(f"permission-bot hook trust: not trusted: {key}: {why}", file=sys.stderr)
    for t in done:
        print(f"{'trusted' if t.changed else 'already trusted'}: {t.key} ({t.trusted_hash}) runs {t.command}")
    return 0
