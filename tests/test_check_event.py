"""bot.cli.check_event.run: exit 0 valid, 1 refused (reason on stderr), 2 unreadable."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.cli.check_event import run

CORPUS: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "fixtures" / "matrix-events" / "examples.json").read_text(encoding="utf-8")
)
SEED = CORPUS[0]["content"]
RUN = "from bot.cli.check_event import run; import sys; raise SystemExit(run(sys.argv[1]))"


def write(tmp_path: Path, data: bytes | str, name: str = "event.json") -> str:
    path = tmp_path / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return str(path)


def stdin_bytes(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


@pytest.mark.parametrize("case", CORPUS, ids=[c["name"] for c in CORPUS])
def test_corpus(case: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run(write(tmp_path, json.dumps(case["content"])))
    out, err = capsys.readouterr()
    if case["valid"]:
        assert (code, out, err) == (0, "valid\n", "")
    else:
        assert code == 1 and out == ""
        assert err.count("\n") == 1 and err.startswith("check-event: refused: ")


def test_refusal_names_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = json.loads(json.dumps(SEED))
    bad["subject"]["expires_at"] = "2026-11-07"
    assert run(write(tmp_path, json.dumps(bad))) == 1
    assert capsys.readouterr().err == (
        'check-event: refused: subject.expires_at: not an RFC 3339 date-time ("2026-11-07")\n'
    )


@pytest.mark.parametrize(
    ("data", "code", "says"),
    [
        (b"[1, 2]", 1, "content: must be a JSON object"),
        (b'"text"', 1, "content: must be a JSON object"),
        (b"", 2, "not JSON"),
        (b"{", 2, "not JSON"),
        (b'{"a": NaN}', 2, "NaN is not JSON"),
        (b'{"a": Infinity}', 2, "Infinity is not JSON"),
        (b"\xff\xfe{}", 2, "not UTF-8"),
        (b"[" * 100_000, 2, "not JSON"),
    ],
)
def test_odd_inputs(data: bytes, code: int, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(write(tmp_path, data)) == code
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1


def test_bom_is_tolerated(tmp_path: Path) -> None:
    assert run(write(tmp_path, b"\xef\xbb\xbf" + json.dumps(SEED).encode())) == 0


def test_missing_file_and_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(str(tmp_path / "nope.json")) == 2
    assert "cannot read" in capsys.readouterr().err
    assert run(str(tmp_path)) == 2
    assert "cannot read" in capsys.readouterr().err


@pytest.mark.parametrize("path", ["-", None])
def test_stdin(path: str | None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    stdin_bytes(monkeypatch, json.dumps(SEED).encode())
    assert run(path) == 0
    stdin_bytes(monkeypatch, b'{"suite_event_type": "dev.agentpod.permission.v2"}')
    assert run(path) == 1
    assert "schema_version: required" in capsys.readouterr().err
    stdin_bytes(monkeypatch, b"not json")
    assert run(path) == 2
    assert "stdin is not JSON" in capsys.readouterr().err


def test_subprocess(tmp_path: Path) -> None:
    """The same through a real process: exit codes, stdout and stderr."""
    good = write(tmp_path, json.dumps(SEED), "good.json")
    bad = write(tmp_path, json.dumps({**SEED, "options": []}), "bad.json")
    cases = [(good, 0, "valid\n", ""), (bad, 1, "", "check-event: refused: options: at least 1 item\n")]
    for path, code, out, err in cases:
        done = subprocess.run([sys.executable, "-c", RUN, path], capture_output=True, text=True, check=False)
        assert (done.returncode, done.stdout, done.stderr) == (code, out, err)
    missing = subprocess.run(
        [sys.executable, "-c", RUN, str(tmp_path / "missing.json")], capture_output=True, text=True, check=False
    )
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    piped = subprocess.run(
        [sys.executable, "-c", RUN, "-"], input=json.dumps(SEED), capture_output=True, text=True, check=False
    )
    assert (piped.returncode, piped.stdout) == (0, "valid\n")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_untrusted_bytes_never_crash(data: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run(write(tmp_path, data))
    out, err = capsys.readouterr()
    assert code in (1, 2) or (code == 0 and out == "valid\n")
    if code:
        assert err.count("\n") == 1 and err.startswith("check-event: ")
