"""Claude Code and Codex permission hooks: hook input -> a permission request -> the hook's decision.

``models`` reads the hook input, ``translate`` turns it into an ACP-shaped submission (pure; the
harness mapping reuses its tool descriptions; an ``AskUserQuestion`` form or an ``ExitPlanMode`` plan gets its
own), ``output`` turns a settled record into the JSON each CLI needs (pure), ``command`` is the `permission-bot
hook` process and ``snippet`` the settings it prints (and this install's permission-bot, by its path);
``codex_trust`` (`hook trust codex`: the trusted_hash Codex checks, for exactly the commands print-config
writes); ``preview_files`` (which file a Write's preview may read, else path, size and SHA-256); ``clis`` the
hook CLI names (imported by the command line without pydantic). The daemon side (``/hooks/{cli}`` and the hold
of one request until it settles or its hook goes away) is in api/hook_hold.py.
"""
