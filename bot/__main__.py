"""`python -m bot` runs the command line."""

from bot.cli.main import main

raise SystemExit(main())
