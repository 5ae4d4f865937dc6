"""The embedded demo: a local Synapse, a bot, a human, a scripted agent (``python -m bot.demo``).

``run(args)`` / ``add_arguments(parser)`` are what a ``permission-bot demo`` subcommand calls;
they import the heavy parts only when used, so ``bot.demo.homeserver`` stays cheap to import.
"""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the demo's flags (--auto, --state-dir, --timeout) to ``p``."""
    from bot.demo.run import add_arguments as add

    add(p)


def run(args: argparse.Namespace) -> int:
    """Run the demo from parsed arguments; the exit code."""
    from bot.demo.run import run as run_demo

    return run_demo(args)
