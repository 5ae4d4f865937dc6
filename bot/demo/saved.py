"""What the demo keeps between runs (``demo.json``, mode 600) and the lock one state dir allows one run."""

from __future__ import annotations

import fcntl
import json
from pathlib import Path
from typing import IO, Any

from bot.demo.say import show
from bot.util.statedir import write_private


class DemoError(Exception):
    """Something the demo cannot get past; the message says what to look at."""


class Saved(dict[str, Any]):
    """The accounts, the room, the API port and token of earlier runs."""

    def __init__(self, state_dir: Path) -> None:
        super().__init__()
        self.path = state_dir / "demo.json"

    def load(self) -> None:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            data = {}
        self.clear()
        self.update(data if isinstance(data, dict) else {})

    def save(self) -> None:
        write_private(self.path, json.dumps(self, indent=2))


def lock(state_dir: Path) -> IO[bytes]:
    """Hold ``demo.lock`` in the state dir (DemoError when another demo holds it)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    f = open(state_dir / "demo.lock", "wb")
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise DemoError(f"another demo is running with {show(state_dir)}; stop it or pass --state-dir") from None
    return f
