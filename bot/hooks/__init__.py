"""Claude Code and Codex permission hooks: hook input -> a permission request -> the hook's decision.

``models`` reads the hook input, ``translate`` turns it into an ACP-shaped submission (pure),
``output`` turns a settled record into the JSON each CLI needs (pure), ``service`` holds one
request in the daemon until it settles or its hook goes away, ``command`` is the
`permission-bot hook` process and ``snippet`` the settings it prints.
"""
