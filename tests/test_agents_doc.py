"""docs/agents.md gives each agent's command line and settings exactly as the matrix test runs them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.agent_setups import SETUPS

DOC = (Path(__file__).resolve().parent.parent / "docs" / "agents.md").read_text()


@pytest.mark.parametrize("name", list(SETUPS))
def test_docs_quote_the_tested_command_line_and_settings(name: str) -> None:
    s = SETUPS[name]
    assert f"`{s.line}`" in DOC, s.line
    if s.settings_path:
        assert f"`~/{s.settings_path}`: `{s.settings_text}`" in DOC, (s.settings_path, s.settings_text)
