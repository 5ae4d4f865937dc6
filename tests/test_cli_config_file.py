"""The one "load the config or exit 2" helper of `run` and `e2ee`: a bad config is one line naming the key,
never a secret, exit 2 (in-process for the helper, and through the console script for both commands)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli.config_file import load_or_exit

SECRET = "hunter2-the-bots-real-password"
MATRIX = f"""[matrix]
homeserver = "http://127.0.0.1:8008"
user_id = "@bot:localhost"
room = "!room:localhost"
password = "{SECRET}"
"""

BAD = [
    ("typo", MATRIX + f'pasword = "{SECRET}"\n', "matrix.pasword: unknown key"),
    ("type", MATRIX.replace(f'"{SECRET}"', f'["{SECRET}"]'), "matrix.password: expected a string (got a list)"),
    (
        "short",
        MATRIX + f'[[api.tokens]]\nname = "ci"\nrole = "agent"\nsecret = "{SECRET[:10]}"\n',
        "api.tokens.0.secret: at least 16 characters (the value is not shown)",
    ),
    ("same", MATRIX + f'[api]\ntoken = "{SECRET}"\n[[api.tokens]]\nname = "ci"\nrole = "agent"\nsecret = "{SECRET}"\n',
     "api.tokens.0.secret: the same secret as another token"),
    ("toml", MATRIX.replace(f'"{SECRET}"', f'"{SECRET}'), "not valid TOML"),
    ("duration", MATRIX + f'[prompts]\ntimeout = ["{SECRET}"]\n', "prompts.timeout: expected a duration"),
    ("webhook", MATRIX + f'[[webhooks]]\nurl = "ftp://x"\nsecret = "{SECRET}"\n', "webhooks.0.url: must start"),
]


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "config.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize(("name", "text", "needle"), BAD, ids=[b[0] for b in BAD])
def test_bad_key_exits_2_with_one_line_and_no_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, needle: str
) -> None:
    with pytest.raises(SystemExit) as e:
        load_or_exit(_write(tmp_path, text))
    assert e.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("permission-bot: config error: ") and err.endswith("\n") and err.count("\n") == 1, err
    assert needle in err, err
    assert SECRET not in err and SECRET[:10] not in err, err


def test_good_config_is_returned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = load_or_exit(_write(tmp_path, MATRIX))
    assert cfg.matrix.password == SECRET and capsys.readouterr() == ("", "")


def test_missing_file_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        load_or_exit(tmp_path / "nope.toml")
    assert e.value.code == 2
    missing = f"{tmp_path / 'nope.toml'}: no such config file (copy config.example.toml)"
    assert capsys.readouterr().err == f"permission-bot: config error: {missing}\n"


@pytest.mark.parametrize("command", [["run"], ["e2ee", "accept-identity", "@a:localhost"], ["e2ee", "reset-identity"]])
def test_commands_share_the_line(tmp_path: Path, command: list[str]) -> None:
    p = _write(tmp_path, MATRIX.replace(f'"{SECRET}"', f'["{SECRET}"]'))
    r = subprocess.run(
        [sys.executable, "-m", "bot", *command, "--config", str(p)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr == "permission-bot: config error: matrix.password: expected a string (got a list)\n"
    assert r.stdout == ""
