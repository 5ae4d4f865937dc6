"""The command line (argparse): ``permission-bot`` run, acp, codex-app-server, hook, permissions, check-event,
doctor, e2ee, state, demo.

Parts: ``main`` (the front: the parser, each verb imported when used), ``run_cmd`` (the daemon: config,
service, API, supervisor), ``acp_cmd`` (the front doors: ``acp`` and ``codex-app-server``), ``hook_cmd``,
``e2ee_cmd``, ``state_cmd`` (state migrate: the crypto-store check, then ``bot.inbox.migrate``), ``check_event``,
``config_file`` (the one "config, or one line naming the key and exit 2"), ``log_setup`` (the log of every
command that logs: the environment's style first, the config's once loaded, every secret masked), ``flags``
(duration flags, the one error line and its exit code), ``http`` (the CLI's client of the daemon's API),
``permissions/`` (ls / approve / deny / watch / rules: args, render (terminal-safe text, the ls table), report,
verbs, watch (inbox/rules at work), session_rules), ``doctor/`` (report, state, config, homeserver, e2ee, room,
answerers; harness/check.py).

Also: ``audit_cmd`` (``permission-bot audit``), ``audit_room`` (the ledger checkpoints the bot posted in its station
rooms, read back for ``audit verify…).
"""
