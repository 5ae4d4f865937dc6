"""The `permission-bot` command line: a thin argparse front over the rest of the package."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from bot import __version__


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="permission-bot",
        description="Approve what coding agents (ACP) want to do, from a Matrix room.",
    )
    p.add_argument("--version", action="version", version=f"permission-bot {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

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
    run.add_argument("--config", default="config.toml", help="the TOML config (default: ./config.toml)")

    doctor = sub.add_parser(
        "doctor", help="check a config against the homeserver and the room",
        description="Check a config, one line per check (ok, WARN, or FAIL -> what to do): the config, the "
        "state folder (or state.database), encryption and the bot's device, the homeserver, the login (the "
        "daemon's saved session when there is one, else a password log-in it logs out again), the bot's "
        "cross-signing identity, the room, the answerers, the API address and the watched harnesses. Exit 0 "
        "when nothing failed, else 1. Never prints a secret.",
    )
    doctor.add_argument("--config", default="config.toml", help="the TOML config (default: ./config.toml)")

    acp = sub.add_parser(
        "acp", help="stand between an ACP client and an agent, taking its permission requests"
    )
    from bot.cli import acp_cmd

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
    from bot.cli import hook_cmd

    hook_cmd.add_arguments(hook)

    perms = sub.add_parser("permissions", help="the permission inbox: ls, approve, deny, answer, submit, watch, rules")
    from bot.cli import permissions

    permissions.add_arguments(perms)

    demo = sub.add_parser("demo", help="run everything on this machine: local Synapse, bot, agent")
    from bot import demo as demo_mod

    demo_mod.add_arguments(demo)

    e2ee = sub.add_parser("e2ee", help="the bot's cross-signing identity; accept an answerer's new identity")
    from bot.cli import e2ee_cmd

    e2ee_cmd.add_arguments(e2ee)

    state = sub.add_parser("state", help="the daemon's state: migrate a SQLite folder into PostgreSQL")
    from bot.cli import state_cmd

    state_cmd.add_arguments(state)

    audit = sub.add_parser("audit", help="the ledger of settlements: export it, verify its chain")
    from bot.cli import audit_cmd

    audit_cmd.add_arguments(audit)

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
    if args.command == "run":
        from bot.cli import run_cmd

        return run_cmd.run(args.config)
    if args.command == "doctor":
        from bot.cli import doctor

        return doctor.run(args.config)
    if args.command == "acp":
        from bot.cli import acp_cmd

        return acp_cmd.run(args)
    if args.command == "codex-app-server":
        from bot.cli import acp_cmd

        return acp_cmd.run_door(args, "codex-app-server", "CODEX_CMD app-server [ARGS]")
    if args.command == "hook":
        from bot.cli import hook_cmd

        return hook_cmd.run(args)
    if args.command == "permissions":
        from bot.cli import permissions

        return permissions.run(args)
    if args.command == "demo":
        from bot import demo as demo_mod

        return demo_mod.run(args)
    if args.command == "e2ee":
        from bot.cli import e2ee_cmd

        return e2ee_cmd.run(args)
    if args.command == "state":
        from bot.cli import state_cmd

        return state_cmd.run(args)
    if args.command == "audit":
        from bot.cli import audit_cmd

        return audit_cmd.run(args)
    if args.command == "check-event":
        from bot.cli import check_event

        return check_event.run(args.file)
    return 2
