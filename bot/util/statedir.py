"""The state folder holds secrets (the Matrix access token in the inbox, the Olm keys): only its owner reads it.

``problem`` says in one line what keeps a state folder from being used (a file in its place, no permission),
for `run` (which then stops) and `doctor` alike.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import structlog

log = structlog.get_logger("state")

DIR_MODE, FILE_MODE = 0o700, 0o600


def write_private(path: Path, data: bytes | str) -> None:
    """Write ``data`` to ``path`` atomically, readable by its owner only from the first byte (0600; the folder
    made when missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    with os.fdopen(fd, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):
        return f"uid {os.geteuid()}"


def problem(path: Path, key: str = "state.path") -> tuple[str, str] | None:
    """What is wrong with ``path`` as the state folder (created when missing) and what to do, or None.

    ``key`` names the config key that chose it. Tried as the user that runs, so it also holds for root
    (whom permissions stop less)."""
    path = path.absolute()
    probe = path
    try:
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        if not probe.is_dir():
            where = "" if probe == path else f" (cannot be made: {probe} is a file)"
            return f"{key}: {path} is not a folder{where}", f"point {key} at a folder (it is made when missing)"
        if not os.access(probe, os.R_OK | os.W_OK | os.X_OK):
            return (f"{key}: {probe} is not readable and writable by this user ({_user()})",
                    f"give that user the folder (chown, chmod 700) or point {key} elsewhere")
        if probe == path:
            for name in os.listdir(path):
                f = path / name
                if f.is_file() and not f.is_symlink() and not os.access(f, os.R_OK | os.W_OK):
                    return (f"{key}: {f} is not readable and writable by this user ({_user()})",
                            f"give that user the state folder and everything in it (chown -R) or point {key} elsewhere")
    except OSError as e:
        return f"{key}: cannot use {path}: {e.strerror or e}", f"fix its permissions or point {key} elsewhere"
    return None


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
