"""``python -m bot.cli.permissions``: the verbs without the top-level CLI's imports."""

import argparse

from bot.cli.permissions import add_arguments, run

parser = argparse.ArgumentParser(prog="permission-bot permissions")
add_arguments(parser)
raise SystemExit(run(parser.parse_args()))
