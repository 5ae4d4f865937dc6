"""A state folder the bot cannot use ends `run` and `doctor` in one line (what, where, what to do), never a
traceback: a file in its place, a file above it, a folder another user owns (run as that other user:
tests run as root, whom permissions do not stop, so the command runs as `nobody` through setpriv)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.demo.homeserver import free_port
from tests.support.station import exe_path

AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def config(folder: Path, state: Path) -> Path:
    cfg = folder / "c.toml"
    cfg.write_text(
        f'[matrix]\nhomeserver = "http://127.0.0.1:{free_port()}"\nuser_id = "@b:x"\npassword = "p"\nroom = "!r:x"\n'
        f'[answerers]\nusers = ["@a:x"]\n[api]\nlisten = "127.0.0.1:{free_port()}"\ntoken = "t"\n'
        f'[state]\npath = "{state}"\n'
    )
    cfg.chmod(0o644)
    return cfg


def cli(*args: str, prefix: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*(prefix or []), exe_path(), *args], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def one_line(p: subprocess.CompletedProcess[str], *words: str) -> str:
    """`run`'s refusal: exit 2, one line on stderr naming ``words``."""
    err = p.stderr.strip()
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert all(w in err for w in words) and " -> " in err, err
    return err


def doctor_state_line(p: subprocess.CompletedProcess[str], *words: str) -> None:
    assert "Traceback" not in p.stdout + p.stderr, p.stdout + p.stderr
    assert p.returncode == 1
    hits = [x for x in p.stdout.splitlines() if x.startswith("FAIL state.path:")]
    assert len(hits) == 1 and all(w in hits[0] for w in words), p.stdout


@pytest.fixture
def folder() -> Iterator[Path]:
    """A folder every user may enter (pytest's tmp_path is its owner's only)."""
    d = Path(tempfile.mkdtemp(prefix="pb-state-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("verb", ["run", "doctor"])
def test_a_file_where_the_folder_should_be(folder: Path, verb: str) -> None:
    (folder / "afile").write_text("x")
    for state in (folder / "afile", folder / "afile" / "state"):
        p = cli(verb, "--config", str(config(folder, state)))
        if verb == "run":
            one_line(p, "state.path:", str(state), "is not a folder", "point state.path at a folder")
        else:
            doctor_state_line(p, str(state), "is not a folder")


def nobody_can_run() -> str | None:
    """Why the test cannot run a command as another user here, or None."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return "needs root and setpriv"
    p = subprocess.run([*AS_NOBODY, exe_path(), "--help"], capture_output=True, timeout=60)
    return None if p.returncode == 0 else "nobody cannot start the console script here"


@pytest.mark.parametrize("verb", ["run", "doctor"])
def test_a_folder_of_another_user(folder: Path, verb: str) -> None:
    if (why := nobody_can_run()) is not None:
        pytest.skip(why)
    state = folder / "state"
    state.mkdir(mode=0o700)  # root's: nobody may neither read nor write it
    (state / "inbox.sqlite3").write_text("")
    probe = subprocess.run([*AS_NOBODY, "test", "-w", str(state)], timeout=30)
    assert probe.returncode != 0, "nobody may write the folder: the test would prove nothing"
    p = cli(verb, "--config", str(config(folder, state)), prefix=AS_NOBODY)
    if verb == "run":
        err = one_line(p, "state.path:", str(state), "(nobody)", "chown")
        assert "state.database" not in err  # no state.database was set
    else:
        doctor_state_line(p, str(state), "(nobody)")
