"""The `permission-bot` command line: a thin argparse front over the rest of the package."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import import_module

from bot import __version__

# Each command's module, imported when the parser is built (its add_arguments) or when the command runs.
COMMANDS = {
    "run": "bot.cli.run_cmd",
    "doctor": "bot.cli.doctor",
    "acp": "bot.cli.acp_cmd",
    "codex-app-server": "bot.cli.acp_cmd",
    "hook": "bot.cli.hook_cmd",
    "permissions": "bot.cli.permissions",
    "demo": "bot.demo",
    "e2ee": "bot.cli.e2ee_cmd",
    "state": "bot.cli.state_cmd",
    "audit": "bot.cli.audit_cmd",
    "check-event": "bot.cli.check_event",
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="permission-bot",
        description="Approve what coding agents (ACP) want to do, from a Matrix room.",
    )
    p.add_argument("--version", action="version", version=f"permission-bot {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    run = sub.add_parser(
        "run", help="run the daemon (Matrix + inbox + HTTP API)", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run the daemon in the foreground until SIGTERM or Ctrl-C: it logs in to the homeserver, "
        "joins the station room, posts each permission request there and serves the HTTP API. The structured "
        "log goes to stderr ([log] level and format); 'ready' says when prompts can be answered.",
        epilog="exit codes: 0 stopped, 1 a failure only a person can fix (one matrix_fatal line says what), "
        "2 a config error (one line naming the key); a leader deposed (another daemon took over) or a database\n"
        "outage ends no daemon: it stands again as a standby (leader_demoted) and retries\n"
        "check a config first: permission-bot doctor --config PATH",
    )
    doctor = sub.add_parser(
        "doctor", help="check a config against the homeserver and the room",
        description="Check a config, one line per check (ok, WARN, or FAIL -> what to do): the config, the "
        "state folder (or state.database), encryption and the bot's device, the homeserver, the login (the "
        "daemon's saved session when there is one, else a password log-in it logs out again), the bot's "
        "cross-signing identity, the room, the answerers, the API address and the watched harnesses. Exit 0 "
        "when nothing failed, else 1. Never prints a secret.",
    )
    for one in (run, doctor):
        one.add_argument("--config", default="config.toml", help="the TOML config (default: ./config.toml)")

    from bot.cli import acp_cmd, hook_cmd

    acp = sub.add_parser("acp", help="stand between an ACP client and an agent, taking its permission requests")
    acp_cmd.add_arguments(acp)

    codex = sub.add_parser(
        "codex-app-server",
        help="stand between an IDE and `codex app-server`, taking its approvals and questions",
        description="A transparent proxy for Codex's app-server protocol (JSON-RPC over stdio): command and file "
        "approvals are posted as permission prompts, item/tool/requestUserInput as questions, and the answers go "
        "back to Codex in its own words; everything else is relayed byte for byte.",
    )
    acp_cmd.add_arguments(codex, "-- CODEX_CMD app-server [ARGS...]")

    hook = sub.add_parser(
        "hook", help="a Claude Code or Codex permission hook (stdin -> decision)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="The hook Claude Code and Codex run before a tool needs permission: it reads the hook input "
        "(JSON) on stdin, asks the daemon, which posts the prompt in the room and holds the request, and prints "
        "the answer as the CLI expects it. With any error it prints no decision (the CLI asks as usual) unless "
        "--fallback deny.",
        epilog="set it up:\n"
        "  permission-bot hook print-config claude-code   > paste into ~/.claude/settings.json\n"
        "  permission-bot hook print-config codex         > into $CODEX_HOME/hooks.json, then\n"
        "  permission-bot hook trust codex\n"
        "try it by hand (a PermissionRequest input):\n"
        "  echo '{\"session_id\":\"s1\",\"cwd\":\"/tmp\",\"hook_event_name\":\"PermissionRequest\",\n"
        "        \"tool_name\":\"Bash\",\"tool_input\":{\"command\":\"ls\"}}' | permission-bot hook claude-code",
    )
    hook_cmd.add_arguments(hook)

    for name, text in (
        ("permissions", "the permission inbox: ls, approve, deny, answer, submit, watch, rules"),
        ("demo", "run everything on this machine: local Synapse, bot, agent"),
        ("e2ee", "the bot's cross-signing identity; accept an answerer's new identity"),
        ("state", "the daemon's state: migrate a SQLite folder into PostgreSQL"),
        ("audit", "the ledger of settlements: export it, verify its chain"),
    ):
        import_module(COMMANDS[name]).add_arguments(sub.add_parser(name, help=text))

    check = sub.add_parser("check-event", help="validate a dev.agentpod.permission.v2 content object")
    check.add_argument("file", nargs="?", default="-", help="a JSON file, or - for stdin (default)")
    return p


# Installed beside us by the test and lint extras, used by no command, and imported by structlog whenever
# present (its rich tracebacks, its Twisted adapter): 65 ms of every start. The console script keeps them out.
# And cffi's Python half: with it importable, pycryptodome (nio's attachment ciphers and hashes) has pycparser
# parse its C declarations at every start, 0.1 s of CPU; without it pycryptodome loads the same library through
# ctypes. (Compiled cffi modules, such as ada-url's, need only _cffi_backend, which stays.)
UNUSED_MODULES = ("rich", "twisted", "cffi")


# The commands that log (structlog, library records); `acp` sets up its own writer, `permissions` and
# `check-event` log nothing (and stay free of structlog: they start fast), `demo` prints its story.
LOGGING_COMMANDS = ("run", "doctor", "hook", "e2ee", "state", "audit")


def entry() -> int:
    """The console script and ``python -m bot``: :func:`main` in a process of its own."""
    for name in UNUSED_MODULES:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]  # None: "import name" raises ImportError
    return main()


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen command; returns the exit code."""
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.command in LOGGING_COMMANDS:  # the one log style from the first line on (bot.cli.log_setup)
        from bot.cli import log_setup

        log_setup.setup()
    command = import_module(COMMANDS[args.command])
    if args.command in ("run", "doctor"):
        code: int = command.run(args.config)
    elif args.command == "codex-app-server":
        code = command.run(args, "codex-app-server")
    elif args.command == "check-event":
        code = command.run(args.file)
    else:
        code = command.run(args)
    return code
