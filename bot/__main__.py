"""`python -m bot` runs the command line."""

from bot.cli.main import entry

raise SystemExit(entry())
