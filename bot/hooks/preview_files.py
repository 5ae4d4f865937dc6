"""Which file a hook may read to show what a Write replaces, and what the prompt says instead.

The model names the path, so a Write's "old content" could be any file the hook can read: an
SSH key, a token file, ``/proc/self/environ``; it would land in the room and in records every
agent token reads. Content is read only from a regular file inside the session's working
directory (the hook input's ``cwd``, both resolved with realpath: no symlink escape), opened
with ``O_NOFOLLOW``, with no other hard link, whose path does not look secret
(:func:`looks_secret`) and that is not the bot's token file. Any other file shows its path,
size and SHA-256 and why no content is shown; nothing under /proc, /sys or /dev is opened.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import BinaryIO

MAX_TEXT = 256 * 1024  # bytes of a file shown as text
MAX_HASH = 64 * 1024 * 1024  # bytes of a withheld file hashed at most
SPECIAL = ("/proc", "/sys", "/dev")
SECRET_DIRS = frozenset({".ssh", ".gnupg", ".aws", ".kube", ".docker", ".password-store"})
SECRET_NAMES = (
    ".env*", "*.pem", "*.key", "id_*", "*token*", "*secret*", "*credential*", "*password*", ".netrc",
    ".pgpass", ".npmrc", ".pypirc", ".htpasswd", "*.p12", "*.pfx", "*.kdbx",
)
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


@dataclass(frozen=True)
class Before:
    """A Write's old file: its ``text`` (None when absent) when ``known``; else maybe why not shown."""

    text: str | None = None
    known: bool = False
    withheld: str | None = None  # what the prompt says instead: path, size, SHA-256, why


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def special(path: str) -> bool:
    """Whether ``path`` (absolute, normalised) is under /proc, /sys or /dev."""
    return any(_under(path, s) for s in SPECIAL)


def looks_secret(path: str) -> str | None:
    """Why ``path`` looks like it holds a secret (a directory such as ``.ssh/``, a name such as
    ``.env``, ``*.pem``, ``id_*``, ``*token*``), or None."""
    parts = PurePosixPath(path).parts
    for d in parts[:-1]:
        if d in SECRET_DIRS:
            return f"it is under {d}/"
    name = parts[-1].lower() if parts else ""
    for pattern in SECRET_NAMES:
        if fnmatch.fnmatchcase(name, pattern):
            return f"its name looks like a secret ({pattern})"
    return None


def refusal(given: str, real: str, cwd: str, token_files: frozenset[str]) -> str | None:
    """Why the file at ``given`` (resolved: ``real``) may not be shown in a session in ``cwd``
    (resolved; "" for none), or None. ``token_files``: the bot's token files, resolved."""
    if special(given) or special(real):
        return "a system file under /proc, /sys or /dev"
    if not cwd:
        return "the hook input names no working directory"
    if not _under(real, cwd):
        via = " through a symlink" if _under(given, cwd) else ""
        return f"outside the session's working directory{via}"
    if real in token_files:
        return "the bot's token file"
    return looks_secret(given) or looks_secret(real)


def read_before(path: str, cwd: str, token_files: Iterable[str] = ()) -> Before:
    """The file a Write of ``path`` replaces, as far as a prompt may show it (see the module)."""
    real, why = None, None
    try:
        if not path or not (os.path.isabs(path) or os.path.isabs(cwd)):
            return Before()
        given = os.path.normpath(os.path.join(cwd, path))
        root = os.path.normpath(cwd) if os.path.isabs(cwd) else ""
        root = os.path.realpath(root) if root and not special(root) else ""
        if special(given):
            return Before(withheld=_note(path, None, None, refusal(given, given, root, frozenset())))
        real = os.path.realpath(given)
        tokens = frozenset(os.path.realpath(t) for t in token_files if t)
        why = refusal(given, real, root, tokens)
        if special(real) or not stat.S_ISREG(os.lstat(real).st_mode):  # never open a FIFO, a device, /proc
            return Before(withheld=_note(path, real, None, why or "not a regular file"))
        fd = os.open(real, _FLAGS)
    except FileNotFoundError:  # a new file; said when it would land outside cwd or under a secret name
        return Before(known=True) if why is None else Before(withheld=_note(path, real, None, f"{why}; no file yet"))
    except (OSError, ValueError) as e:
        why = (e.strerror or type(e).__name__).lower() if isinstance(e, OSError) else "not a valid path"
        return Before(withheld=_note(path, None, None, f"it cannot be opened ({why})"))
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        opened = real  # what was really opened, should a directory have moved meanwhile
        with contextlib.suppress(OSError):
            opened = os.readlink(f"/proc/self/fd/{fd}") or real
        why = why or refusal(given, opened, root, tokens)
        if special(opened) or not stat.S_ISREG(st.st_mode):
            return Before(withheld=_note(path, real, None, why or "not a regular file"))
        why = why or _token_file(st, tokens)
        if why is None and st.st_nlink > 1:
            why = "it has other hard links"
        return _read(f, path, real, st.st_size, why)


def _read(f: BinaryIO, path: str, real: str, size: int, why: str | None) -> Before:
    """Its text when nothing forbids it (``why`` is None) and it is small UTF-8, else its size and hash."""
    if why is None and size > MAX_TEXT:
        why = f"larger than {MAX_TEXT // 1024} KiB"
    if why is None:
        raw = f.read(MAX_TEXT + 1)
        with contextlib.suppress(UnicodeDecodeError):
            if len(raw) <= MAX_TEXT:
                return Before(text=raw.decode("utf-8"), known=True)
        why = "not UTF-8 text" if len(raw) <= MAX_TEXT else f"larger than {MAX_TEXT // 1024} KiB"
        f.seek(0)
    digest, n = hashlib.sha256(), 0
    while n <= MAX_HASH and (chunk := f.read(1024 * 1024)):
        digest.update(chunk)
        n += len(chunk)
    return Before(withheld=_note(path, real, (n, digest.hexdigest()) if n <= MAX_HASH else (size, None), why))


def _note(path: str, real: str | None, size_hash: tuple[int, str | None] | None, why: str | None) -> str:
    moved = f" (resolves to {real})" if real and real != path else ""
    told = f"the file on disk, {path}{moved}, is not shown: {why}"
    if size_hash is not None:
        size, sha = size_hash
        told += f"; {size} bytes" + (f", SHA-256 {sha}" if sha else "")
    return told


def _token_file(st: os.stat_result, tokens: frozenset[str]) -> str | None:
    for t in tokens:
        try:
            if os.path.samestat(st, os.stat(t)):
                return "the bot's token file"
        except OSError:
            continue
    return None
