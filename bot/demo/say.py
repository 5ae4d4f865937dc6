"""What the demo prints and how it names things for the reader: lines, paths, the command to type."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sys
from pathlib import Path

_OUT = {"closed": False}


def say(line: str = "") -> None:
    """One line to stdout; a closed pipe (``| head``) silences the rest instead of failing the run."""
    if _OUT["closed"]:
        return
    try:
        print(line, flush=True)
    except BrokenPipeError:
        _OUT["closed"] = True
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def show(path: Path) -> str:
    """``path`` relative to the working directory when it is below it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def bindable(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Synapse and the daemon bind it
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def console_script() -> list[str]:
    """How to call ``permission-bot``: the console script beside this interpreter, else ``python -m bot``."""
    exe = Path(sys.executable).parent / "permission-bot"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "bot"]


def show_cli() -> list[str]:
    """``permission-bot`` as the reader can type it."""
    exe = Path(sys.executable).parent / "permission-bot"
    if not exe.exists():
        return [show(Path(sys.executable)), "-m", "bot"]
    on_path = shutil.which("permission-bot")
    return ["permission-bot"] if on_path and Path(on_path).resolve() == exe.resolve() else [show(exe)]
