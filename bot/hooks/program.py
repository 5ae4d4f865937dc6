"""Where this install's ``permission-bot`` is: the one program ``hook print-config codex`` writes into a
hook and ``hook trust codex`` trusts (never a program merely named ``permission-bot`` elsewhere)."""

from __future__ import annotations

import os
import sys

NAME = "permission-bot"


def own_program(argv0: str | None = None, executable: str | None = None) -> str | None:
    """The resolved absolute path of this install's console script: the one that is running (``argv[0]``),
    else the one beside this interpreter; None when neither is an executable file."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = sys.executable if executable is None else executable
    candidates = [argv0] if os.path.basename(argv0) == NAME else []
    if executable:
        candidates.append(os.path.join(os.path.dirname(executable), NAME))
    for c in candidates:
        path = os.path.realpath(c)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None
