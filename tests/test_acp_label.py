"""`permission-bot acp --label` with a name the daemon would refuse on every request (422) stops at
start: exit 2, one line, and the agent is never started."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.util.ids import is_safe_id
from tests.test_acp_relay import CLOSED_URL, proxy_cmd


@pytest.mark.parametrize("label", ["Claude on laptop", "a/../b", "x" * 129, "naïve", "tab\there"])
def test_a_bad_label_exits_2_before_the_agent_starts(tmp_path: Path, label: str) -> None:
    assert not is_safe_id(label)  # the daemon's rule (bot/util/ids.py), which refuses it at submit
    marker = tmp_path / "agent-ran"
    agent = [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]
    r = subprocess.run([*proxy_cmd(), "--url", CLOSED_URL, "--label", label, "--", *agent],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "--label must be 1 to 128 letters, digits and ._:@-" in r.stderr
    assert not marker.exists()


def test_a_good_label_starts_the_agent(tmp_path: Path) -> None:
    marker = tmp_path / "agent-ran"
    agent = [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]
    r = subprocess.run([*proxy_cmd(), "--url", CLOSED_URL, "--label", "claude@laptop", "--", *agent],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and marker.exists(), r.stderr
