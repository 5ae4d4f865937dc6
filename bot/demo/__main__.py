"""`python -m bot.demo [--auto] [--state-dir DIR]`: see bot.demo.run."""

from bot.demo.run import main

raise SystemExit(main())
