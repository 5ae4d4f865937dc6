"""`permission-bot acp [--url URL] [--token-file PATH] [--label NAME] -- AGENT_CMD [ARGS...]`, and the same for
`permission-bot codex-app-server ... -- CODEX_CMD app-server [ARGS...]` (Codex's app-server protocol).

Stands where an ACP client (an IDE, for Codex) would start the agent: starts it, relays stdio both ways and
takes its permission requests to the daemon. stdout carries only the agent's bytes; the proxy's own logs go to
stderr. The agent is untrusted: it starts without any ``PERMISSION_BOT_*`` variable, and the proxy hides the
token from the agent's view of ``/proc/PPID`` too (:mod:`bot.util.hide`).
"""

from __future__ import annotations

import argparse
from typing import Literal, cast

from bot.cli.flags import duration_flag, fail


def add_arguments(p: argparse.ArgumentParser, metavar: str = "-- AGENT_CMD [ARGS...]") -> None:
    """Add a door's flags (``acp``, ``codex-app-server``) and the agent command (everything after ``--``)."""
    p.add_argument("--url", help="the daemon's HTTP API (default: $PERMISSION_BOT_URL, else http://127.0.0.1:8750)")
    p.add_argument("--token-file", metavar="PATH", help="a file holding the agent token (else $PERMISSION_BOT_TOKEN)")
    p.add_argument("--token", help="deprecated: the token in argv, readable by any local process")
    p.add_argument("--label", help="a human name for this agent's sessions in prompts")
    p.add_argument("--connect-timeout", default="30s", metavar="DUR",
                   help="how long to try an unreachable daemon before the fallback (default: 30s)")
    p.add_argument("--fallback", choices=("forward", "reject"), default="reject",
                   help="when the daemon cannot be reached: forward the request to the client, or reject it "
                   "(default: reject)")
    # dest is not "command": the main parser's subcommand already lives there
    p.add_argument("agent_command", nargs=argparse.REMAINDER, metavar=metavar, help="the agent to start")


def run(args: argparse.Namespace, door: str = "acp") -> int:
    """Run the door ``door`` (``acp``, ``codex-app-server``) until the agent exits; its exit code (2 for a usage
    error)."""
    from bot.cli.http import UsageError, discover
    from bot.util.discovery import ARGV_TOKEN_WARNING

    prog = f"permission-bot {door}"
    usage = "AGENT_CMD [ARGS]" if door == "acp" else "CODEX_CMD app-server [ARGS]"
    cmd = [str(c) for c in args.agent_command]
    cmd = cmd[1:] if cmd[:1] == ["--"] else cmd
    if not cmd:
        return fail(f"no agent command; usage: {prog} [flags] -- {usage}", 2, prog)
    from bot.util.ids import SAFE_ID_RULE, is_safe_id

    if args.label is not None and args.label != "" and not is_safe_id(args.label):
        # the daemon refuses such a label (422) on every request: say so now, once
        return fail(f"--label must be {SAFE_ID_RULE} (got {args.label[:80]!r})", 2, prog)
    connect_timeout = duration_flag(prog, "--connect-timeout", args.connect_timeout)
    if connect_timeout is None:
        return 2
    try:
        url, token = discover(args.url, args.token, args.token_file)  # a bad --token-file or --url: one line
    except UsageError as e:
        return fail(str(e), 2, prog)
    from bot.util.hide import hide_secrets

    hide_secrets()

    from bot.door.config import ProxyConfig
    from bot.door.log import configure_stderr_logging

    if door == "acp":
        from bot.acp.run import run_proxy
    else:
        from bot.codex.run import run_proxy

    stderr = configure_stderr_logging(secrets=[token] if token else ())
    if args.token is not None:
        import structlog

        structlog.get_logger(f"bot.{door}").warning("token_on_command_line", message=ARGV_TOKEN_WARNING)
    fallback = cast(Literal["forward", "reject"], args.fallback)
    cfg = ProxyConfig(command=cmd, url=url, token=token, label=args.label or None, connect_timeout=connect_timeout,
                      fallback=fallback)
    from bot.util import aio  # here, not at the top: the parser of every other command imports this module

    try:
        return aio.run(run_proxy(cfg))
    except KeyboardInterrupt:
        return 130
    finally:
        stderr.drain()  # queued log lines get up to a second to be written


if __name__ == "__main__":  # ``permission-bot acp`` on its own
    parser = argparse.ArgumentParser(prog="permission-bot acp")
    add_arguments(parser)
    raise SystemExit(run(parser.parse_args()))
