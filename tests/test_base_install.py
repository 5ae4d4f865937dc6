"""The base install (no extras) runs every command but the demo: the demo's own dependencies
(Synapse, PyYAML, tomli-w) are imported only when the demo runs."""

from __future__ import annotations

import subprocess
import sys

BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"yaml", "tomli_w", "synapse"}:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Block())
from bot.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", BLOCK, *args], capture_output=True, text=True, timeout=60)


def test_commands_parse_without_the_demo_extra() -> None:
    r = _run("check-event", "--help")
    assert r.returncode == 0, r.stderr
    r = _run("run", "--config", "/nonexistent/config.toml")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr


def test_the_demo_says_which_extra_it_needs() -> None:
    r = _run("demo", "--auto")
    assert r.returncode == 2 and "matrix-permission-bot[demo]" in r.stderr and "Traceback" not in r.stderr, r.stderr
