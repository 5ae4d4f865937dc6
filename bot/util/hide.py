"""Keep a client's token out of what an untrusted agent can read about the process.

The proxy's agent starts without ``PERMISSION_BOT_*`` variables, but a command it runs can
still read the proxy's ``/proc/PPID/environ`` and ``/proc/PPID/cmdline``, and those of a
person's ``permissions watch`` running as the same user. So, on Linux, these clients

- makes itself not dumpable (``PR_SET_DUMPABLE`` 0): another process of the same user can
  no longer open its ``environ`` or memory, nor ptrace it;
- overwrites, in its own memory, the initial environment's ``PERMISSION_BOT_*`` values and an
  argv ``--token`` value, which is what ``/proc/PID/environ`` and ``cmdline`` show (this holds
  even against root, who ignores the dumpable flag). Python's ``os.environ`` and ``sys.argv``
  are copies made at start and keep working.

Both steps are best effort: elsewhere, or when ``/proc`` is missing, nothing happens.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys

from bot.util import discovery

PR_SET_DUMPABLE = 4
ENV_PREFIX = discovery.ENV_PREFIX.encode()


def _regions() -> tuple[tuple[int, int], tuple[int, int]] | None:
    """(arg_start, arg_end), (env_start, env_end) of this process, from /proc/self/stat (fields 48-51)."""
    try:
        with open("/proc/self/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2 :].split()  # fields[0] is field 3 (state)
    if len(fields) < 49:
        return None
    a0, a1, e0, e1 = (int(fields[n - 3]) for n in (48, 49, 50, 51))
    return (a0, a1), (e0, e1)


def scrub_block(start: int, end: int, secret_after: bytes | None = None) -> int:
    """Zero, in memory ``[start, end)`` (NUL-separated words), the values of ``PERMISSION_BOT_*=``
    words and the word after ``secret_after``; how many words were blanked."""
    if end <= start:
        return 0
    words = ctypes.string_at(start, end - start).split(b"\0")
    off, n, blank_next = start, 0, False
    for w in words:
        key, eq, value = w.partition(b"=")
        if blank_next or (secret_after is not None and w.startswith(secret_after + b"=")):
            skip = 0 if blank_next else len(secret_after or b"") + 1
            ctypes.memset(off + skip, 0, len(w) - skip)  # never negative: skip is 0 or a prefix of w
            n += 1
        elif eq and key.upper().startswith(ENV_PREFIX):
            ctypes.memset(off + len(key) + 1, 0, len(value))
            n += 1
        blank_next = secret_after is not None and w == secret_after
        off += len(w) + 1
    return n


def hide_secrets() -> None:
    """Not dumpable, and no token left in this process's /proc environ or cmdline (Linux only)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    regions = _regions()
    if regions is None:
        return
    (a0, a1), (e0, e1) = regions
    scrub_block(e0, e1)
    scrub_block(a0, a1, secret_after=b"--token")
