"""In-process guards against an untrusted agent: id charset, URL segments, the agent's environment,
token files, state-folder modes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from bot.inbox.submission import SubmissionError, parse_submission
from bot.util.discovery import TokenFileError, agent_environment, discover, read_token_file
from bot.util.ids import is_safe_id, url_segment
from bot.util.statedir import secure_state_dir


def _body(**kw: object) -> dict[str, object]:
    return {
        "sessionId": "s1",
        "toolCall": {"toolCallId": "c1"},
        "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}],
        **kw,
    }


@pytest.mark.parametrize("good", ["sess_1", "a.b:c@d-e", "x" * 128, "0"])
def test_safe_ids(good: str) -> None:
    assert is_safe_id(good)
    parse_submission(_body(sessionId=good, key=good, label=good))


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("sessionId", "x/../victim"),
        ("sessionId", "dir/sess"),
        ("sessionId", "a%2Fb"),
        ("sessionId", "a b"),
        ("sessionId", "x" * 129),
        ("sessionId", "é"),
        ("sessionId", "a\u202eb"),
        ("key", "k?x=1"),
        ("label", "Read the docs first"),
        ("label", "a\nb"),
    ],
)
def test_unsafe_ids_are_refused_naming_the_field(field: str, bad: str) -> None:
    with pytest.raises(SubmissionError, match=rf"^{field}: must be 1 to 128 letters, digits and \._:@-"):
        parse_submission(_body(**{field: bad}))


@pytest.mark.parametrize(
    ("rid", "seg"),
    [("sess_1:3", "sess_1:3"), ("x/../victim:1", "x%2F..%2Fvictim:1"), ("..", "%2E%2E"), (".", "%2E"),
     ("a?b#c%d", "a%3Fb%23c%25d")],
)
def test_ids_are_one_url_segment(rid: str, seg: str) -> None:
    assert url_segment(rid) == seg


def test_agent_environment_drops_every_permission_bot_variable() -> None:
    env = {"PATH": "/bin", "PERMISSION_BOT_TOKEN": "t", "PERMISSION_BOT_URL": "u", "permission_bot_x": "y",
           "PERMISSION_BOT_MATRIX_PASSWORD": "p", "HOME": "/h"}
    assert agent_environment(env) == {"PATH": "/bin", "HOME": "/h"}


def test_token_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERMISSION_BOT_TOKEN", "from-env")
    f = tmp_path / "tok"
    f.write_text("  from-file-123  \nignored\n")
    assert read_token_file(str(f)) == "from-file-123"
    assert discover("http://h:1/", "from-argv", str(f)) == ("http://h:1", "from-file-123")
    assert discover(None, None, None)[1] == "from-env"
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(TokenFileError, match="is empty"):
        read_token_file(str(tmp_path / "empty"))
    with pytest.raises(TokenFileError, match="cannot read it"):
        read_token_file(str(tmp_path / "missing"))


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.lstat().st_mode)


def test_state_dir_is_made_private_even_when_it_exists(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (state / "nio").mkdir(parents=True)
    for p in (state, state / "nio"):
        p.chmod(0o755)
    for name in ("inbox.sqlite3", "inbox.sqlite3-wal", "nio/keys.db"):
        (state / name).write_text("x")
        (state / name).chmod(0o644)
    os.symlink("/etc/hostname", state / "link")
    assert secure_state_dir(state) == 5
    assert _mode(state) == _mode(state / "nio") == 0o700
    assert {_mode(state / n) for n in ("inbox.sqlite3", "inbox.sqlite3-wal", "nio/keys.db")} == {0o600}
    assert secure_state_dir(state) == 0  # idempotent
    fresh = tmp_path / "a" / "b"
    secure_state_dir(fresh)
    assert _mode(fresh) == 0o700


def test_the_proxy_client_never_lets_an_id_walk_the_path() -> None:
    from bot.door.daemon_client import DaemonClient

    c = DaemonClient("http://127.0.0.1:1/", None)
    assert str(c._one("x/../victim:1")) == "http://127.0.0.1:1/permissions/x%2F..%2Fvictim:1"
    assert str(c._one("..")) == "http://127.0.0.1:1/permissions/%2E%2E"
    assert str(c._one("sess_1:3")) == "http://127.0.0.1:1/permissions/sess_1:3"


def test_scrub_block_blanks_token_values_in_place() -> None:
    import ctypes

    from bot.util.hide import scrub_block

    raw = b"prog\0--token\0s3cret\0--token=s3cret2\0--token-file\0/p\0PERMISSION_BOT_TOKEN=abc\0HOME=/h\0"
    buf = ctypes.create_string_buffer(raw, len(raw))
    start = ctypes.addressof(buf)
    assert scrub_block(start, start + len(raw), secret_after=b"--token") == 3
    assert buf.raw == (b"prog\0--token\0" + b"\0" * 6 + b"\0--token=" + b"\0" * 7 + b"\0--token-file\0/p\0"
                       b"PERMISSION_BOT_TOKEN=\0\0\0\0HOME=/h\0")
