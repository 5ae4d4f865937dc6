"""``python -m bot.cli.permissions``: the verbs without the top-level CLI's imports."""

from bot.cli.permissions import main

raise SystemExit(main())
