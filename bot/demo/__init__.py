"""The embedded demo: a local Synapse, a bot, a human, a scripted agent (``python -m bot.demo``).

``run(args)`` / ``add_arguments(parser)`` are what a ``permission-bot demo`` subcommand calls;
``run`` imports the heavy parts only when used, so ``bot.demo.homeserver`` stays cheap to import.

Also: ``client`` (the demo's ACP client (official SDK)), ``daemon`` (the demo's permission-bot daemon),
``homeserver`` (A local Synapse on 127.0.0.1 (SQLite, rate limits lifted) for the demo and the tests;…), ``saved``
(what the demo keeps between runs (``demo.json``, mode 600) and the lock one state dir…), ``say`` (what the demo
prints and how it names things for the reader), ``station`` (the demo's Matrix side), ``synapse_config`` (synapse's
generated config, adjusted as YAML (loaded, changed, dumped)).
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the demo's flags (--auto, --state-dir, --timeout) to ``p`` (imports nothing heavy: the CLI
    builds its parser on every command, and the demo's own dependencies are an extra)."""
    p.add_argument("--auto", action="store_true",
                   help="answer the prompt from a scripted human (replies 1) and exit when the agent has its outcome")
    p.add_argument("--state-dir", default="demo-state", metavar="DIR",
                   help="where Synapse, the accounts and the daemon keep their state (default: ./demo-state)")
    p.add_argument("--timeout", type=float, default=90.0, metavar="SECONDS",
                   help="with --auto: give up when the agent has no outcome after this long (default: 90)")


def run(args: argparse.Namespace) -> int:
    """Run the demo from parsed arguments; the exit code."""
    try:
        from bot.demo.run import run as run_demo
    except ImportError as e:  # Synapse, PyYAML and tomli-w come with the demo extra
        print(f"permission-bot demo: {e.name or e} is missing: pip install 'matrix-permission-bot[demo]'",
              file=sys.stderr)
        return 2
    return run_demo(args)
