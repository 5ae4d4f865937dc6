"""The state folder holds secrets (the Matrix access token in the inbox, the Olm keys): only its owner reads it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import structlog

log = structlog.get_logger("state")

DIR_MODE, FILE_MODE = 0o700, 0o600


def secure_state_dir(path: Path) -> int:
    """Make ``path`` (created if missing) 0700 and everything under it 0700/0600; how many modes changed.

    Runs at every start, so a folder made by an older version, or copied in, is fixed too.
    Symlinks are left alone (their targets are not ours to change).
    """
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    fixed = 0
    for root, dirs, files in os.walk(path):
        for name, want in [(".", DIR_MODE), *((d, DIR_MODE) for d in dirs), *((f, FILE_MODE) for f in files)]:
            p = os.path.join(root, name)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode) or stat.S_IMODE(st.st_mode) == want:
                continue
            os.chmod(p, want)
            fixed += 1
    if fixed:
        log.info("state_permissions_fixed", path=str(path), changed=fixed)
    return fixed
