"""The demo (`python -m bot.demo`): --auto runs to the agent's outcome; SIGTERM and Ctrl-C leave nothing behind.
Also: docs/prompt-rendered.html is what scripts/render_prompt.py makes of the seed example."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def demo_cmd(state: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "bot.demo", "--state-dir", str(state), *extra]


def demo_processes(state: Path) -> list[int]:
    """Processes that belong to the demo with this state dir: by command line (Synapse, the daemon,
    the ACP proxy's --url) or by the demo's agent token in their environment."""
    saved = json.loads((state / "demo.json").read_text())
    token = saved["agent_token"]
    mine = str(state).encode()
    # the ACP proxy blanks its token in /proc (issue 12): it is found by its --url instead
    url = f"\0http://127.0.0.1:{saved.get('api_port')}\0".encode()
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmdline = (d / "cmdline").read_bytes()
            environ = (d / "environ").read_bytes()
            status = (d / "status").read_text()
        except OSError:
            continue
        if "\nState:\tZ" in status:
            continue
        if mine in cmdline or url in cmdline or f"PERMISSION_BOT_TOKEN={token}".encode() in environ.split(b"\0"):
            found.append(int(d.name))
    return found


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One state dir for the module: the first run creates it, the later ones reuse it (as people do)."""
    yield tmp_path_factory.mktemp("demo") / "state"


@pytest.mark.e2e
def test_auto_runs_to_the_outcome(state: Path) -> None:
    started = time.monotonic()
    p = subprocess.run(
        demo_cmd(state, "--auto"), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=ROOT
    )
    took = time.monotonic() - started
    out = p.stdout
    assert p.returncode == 0, out + p.stderr
    # the prompt as posted, how to answer, then the agent's outcome
    assert "Permission needed: Run `rm -rf build/`" in out
    assert "1. Allow once" in out and "4. Never allow" in out
    assert "log in as alice / demo-alice-password" in out
    assert "PERMISSION_BOT_URL=http://127.0.0.1:" in out and "PERMISSION_BOT_TOKEN=" in out
    assert "permissions approve demo_" in out
    assert '[auto] @alice:localhost replies "1" to the prompt' in out
    outcome = [x for x in out.splitlines() if x.startswith("Outcome:")]
    assert outcome == [
        "Outcome: the agent got selected allow_once (Allow once), answered by @alice:localhost via matrix; "
        "its turn ended with end_turn"
    ], out
    assert out.index("Permission needed") < out.index("How to answer") < out.index("Outcome:")
    assert "Stopped: the agent, the daemon, Synapse." in out
    assert not demo_processes(state), "the demo left processes behind"
    assert took < 90, f"the demo took {took:.0f}s"


def _start(state: Path, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            demo_cmd(state),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
            start_new_session=True,  # its own process group, as a terminal's foreground job
        )


def _wait_for(log: Path, proc: subprocess.Popen[bytes], text: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        assert proc.poll() is None, log.read_text(errors="replace")
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never appeared:\n{log.read_text(errors='replace')}")


@pytest.mark.e2e
@pytest.mark.parametrize("how", ["SIGTERM to the demo", "Ctrl-C (SIGINT to its process group)"])
def test_signals_stop_everything(state: Path, tmp_path: Path, how: str) -> None:
    log = tmp_path / "demo.out"
    proc = _start(state, log)
    try:
        _wait_for(log, proc, "Waiting for an answer")
        running = demo_processes(state)
        assert len(running) >= 4, f"expected Synapse, the daemon, the proxy and the agent: {running}"
        if how.startswith("SIGTERM"):
            proc.send_signal(signal.SIGTERM)
        else:
            os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(45)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    out = log.read_text(errors="replace")
    assert code == 130, out
    assert "stopping everything the demo started" in out
    assert "Stopped: the agent, the daemon, Synapse." in out
    deadline = time.monotonic() + 10
    while demo_processes(state) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not demo_processes(state), f"left behind: {demo_processes(state)}"
    assert "Traceback" not in out, out


def test_rendered_prompt_page_is_current() -> None:
    import runpy

    script = runpy.run_path(str(ROOT / "scripts" / "render_prompt.py"))
    render_page, seed_prompt = script["render_page"], script["seed_prompt"]
    page = (ROOT / "docs" / "prompt-rendered.html").read_text(encoding="utf-8")
    assert page == render_page(), "regenerate: python scripts/render_prompt.py docs/prompt-rendered.html"
    prompt = seed_prompt()
    assert prompt["formatted_body"] in page
    assert prompt["body"].startswith("Permission needed: Run the test suite\nKind: execute\nCommand:\n│ bun test\n")
    assert "\n\n1. Allow once\n" in prompt["body"]
    assert "<code>bun test</code>" in prompt["formatted_body"]


def test_demo_script_is_valid_bash() -> None:
    script = ROOT / "scripts" / "demo"
    assert os.access(script, os.X_OK)
    subprocess.run(["bash", "-n", str(script)], check=True)
