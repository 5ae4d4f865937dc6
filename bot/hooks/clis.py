"""The CLIs whose hooks the bot answers: names only, so the command line parser imports no pydantic."""

from __future__ import annotations

from typing import Literal

Cli = Literal["claude-code", "codex"]
CLIS: tuple[Cli, ...] = ("claude-code", "codex")
NAMES: dict[Cli, str] = {"claude-code": "Claude Code", "codex": "Codex"}  # as people write them
