"""`permission-bot permissions ls` starts fast: the command line parser imports none of the daemon's libraries."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("pydantic", "nio", "aiohttp", "asyncio", "structlog", "aiosqlite", "jsonschema")


@pytest.mark.parametrize("argv", [["permissions", "ls"], ["permissions", "approve", "s:1"], ["permissions", "--help"]])
def test_the_permissions_verbs_load_no_daemon_library(argv: list[str]) -> None:
    code = (
        "import sys\n"
        "from bot.cli.main import _parser\n"
        f"try:\n    _parser().parse_args({argv!r})\nexcept SystemExit:\n    pass\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r}))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert r.stdout.strip().splitlines()[-1] == "[]", r.stdout


def test_the_hook_models_still_name_the_clis() -> None:
    from bot.hooks import clis, models

    assert models.CLIS == clis.CLIS == ("claude-code", "codex")
