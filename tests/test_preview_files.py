"""Which file a hook may read to preview a Write (bot/hooks/preview_files.py): the pure policy and the reader."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from bot.hooks.preview_files import MAX_TEXT, looks_secret, read_before, refusal

CWD = "/work/proj"


@pytest.mark.parametrize(
    ("given", "real", "why"),
    [
        ("/work/proj/src/a.py", "/work/proj/src/a.py", None),
        ("/work/proj/README", "/work/proj/README", None),
        ("/proc/self/environ", "/proc/123/environ", "/proc"),
        ("/sys/kernel/x", "/sys/kernel/x", "/proc"),
        ("/dev/tty", "/dev/pts/1", "/proc"),
        ("/home/u/.ssh/id_ed25519", "/home/u/.ssh/id_ed25519", "outside"),
        ("/work/proj/link", "/home/u/.ssh/id_ed25519", "through a symlink"),
        ("/work/proj-other/a.py", "/work/proj-other/a.py", "outside"),  # a sibling with the same prefix
        ("/work/proj/.env", "/work/proj/.env", ".env*"),
        ("/work/proj/.env.local", "/work/proj/.env.local", ".env*"),
        ("/work/proj/certs/site.pem", "/work/proj/certs/site.pem", "*.pem"),
        ("/work/proj/tls.KEY", "/work/proj/tls.KEY", "*.key"),
        ("/work/proj/id_rsa", "/work/proj/id_rsa", "id_*"),
        ("/work/proj/decider.token", "/work/proj/decider.token", "*token*"),
        ("/work/proj/client_secret.json", "/work/proj/client_secret.json", "*secret*"),
        ("/work/proj/.ssh/config", "/work/proj/.ssh/config", ".ssh/"),
        ("/work/proj/.gnupg/pubring.kbx", "/work/proj/.gnupg/pubring.kbx", ".gnupg/"),
        ("/work/proj/.netrc", "/work/proj/.netrc", ".netrc"),
        ("/work/proj/.pgpass", "/work/proj/.pgpass", ".pgpass"),
        ("/work/proj/.aws/credentials", "/work/proj/.aws/credentials", ".aws/"),
        ("/work/proj/credentials.json", "/work/proj/credentials.json", "*credential*"),
        ("/work/proj/notes.txt", "/work/proj/.env", ".env*"),  # an innocent name for a secret file
        ("/work/proj/bot", "/etc/permission-bot/agent", "outside"),
        ("/work/proj/agent", "/work/proj/agent", "token file"),
    ],
)
def test_refusal(given: str, real: str, why: str | None) -> None:
    got = refusal(given, real, CWD, frozenset({"/work/proj/agent"}))
    assert (got is None) if why is None else (got is not None and why in got), got


def test_no_working_directory_shows_nothing() -> None:
    assert refusal("/work/proj/a.py", "/work/proj/a.py", "", frozenset()) is not None


def test_ordinary_names_do_not_look_secret() -> None:
    for p in ("src/main.py", "README.md", "Makefile", "keyboard.c", "tests/test_env.py", "docs/identity.md"):
        assert looks_secret(p) is None, p


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_file_inside_the_working_directory_is_read(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("old line\n")
    b = read_before(str(tmp_path / "a.txt"), str(tmp_path))
    assert b.known and b.text == "old line\n" and b.withheld is None
    b = read_before("a.txt", str(tmp_path))  # relative to cwd
    assert b.text == "old line\n"
    b = read_before("missing.txt", str(tmp_path))
    assert b.known and b.text is None and b.withheld is None  # a new file


def test_a_new_file_outside_cwd_or_through_a_dangling_symlink_is_said(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "out").symlink_to(tmp_path / "elsewhere.txt")
    b = read_before("out", str(proj))
    assert not b.known and b.withheld is not None and "through a symlink; no file yet" in b.withheld
    assert str(tmp_path / "elsewhere.txt") in b.withheld
    b = read_before(str(tmp_path / "new.txt"), str(proj))
    assert not b.known and b.withheld is not None and "outside" in b.withheld


def test_secrets_show_path_size_and_hash_never_content(tmp_path: Path) -> None:
    proj, home = tmp_path / "proj", tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    proj.mkdir()
    key = b"-----BEGIN OPENSSH PRIVATE KEY-----\nsecretkey\n"
    (home / ".ssh" / "id_ed25519").write_bytes(key)
    (proj / ".env").write_bytes(b"API_KEY=hunter2\n")
    (proj / "link").symlink_to(home / ".ssh" / "id_ed25519")
    token = tmp_path / "agent-file"
    token.write_bytes(b"tok-123\n")
    cases = [
        (str(home / ".ssh" / "id_ed25519"), key, "outside"),
        ("link", key, "symlink"),
        (".env", b"API_KEY=hunter2\n", ".env"),
        (str(token), b"tok-123\n", "outside"),
    ]
    for path, data, why in cases:
        b = read_before(path, str(proj), [str(token)])
        assert not b.known and b.text is None, path
        assert b.withheld is not None and why in b.withheld and _sha(data) in b.withheld, (path, b)
        assert f"{len(data)} bytes" in b.withheld and data.decode() not in b.withheld
    (proj / "agent").write_bytes(b"tok-456\n")
    b = read_before("agent", str(proj), [str(proj / "agent")])
    assert b.withheld is not None and "token file" in b.withheld and "tok-456" not in b.withheld


def test_a_hard_link_to_a_token_file_is_not_read(tmp_path: Path) -> None:
    token = tmp_path / "t"
    token.write_bytes(b"tok\n")
    proj = tmp_path / "proj"
    proj.mkdir()
    os.link(token, proj / "notes.txt")
    b = read_before("notes.txt", str(proj), [str(token)])
    assert b.text is None and b.withheld is not None and "token file" in b.withheld
    b = read_before("notes.txt", str(proj))
    assert b.text is None and b.withheld is not None and "hard links" in b.withheld


def test_proc_is_never_opened() -> None:
    for path in ("/proc/self/environ", "/sys/kernel/hostname", "/dev/zero"):
        b = read_before(path, "/")
        assert b.text is None and b.withheld is not None and "/proc, /sys or /dev" in b.withheld
        assert "bytes" not in b.withheld and "SHA-256" not in b.withheld  # not even hashed


def test_a_symlink_into_proc_is_never_opened(tmp_path: Path) -> None:
    (tmp_path / "env").symlink_to("/proc/self/environ")
    b = read_before("env", str(tmp_path))
    assert b.text is None and b.withheld is not None and "SHA-256" not in b.withheld


def test_big_binary_fifo_and_directory_are_not_shown(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * (MAX_TEXT + 1))
    b = read_before("big", str(tmp_path))
    assert b.text is None and b.withheld is not None and "KiB" in b.withheld
    assert _sha(b"x" * (MAX_TEXT + 1)) in b.withheld
    (tmp_path / "bin").write_bytes(b"\xff\xfe\x00")
    b = read_before("bin", str(tmp_path))
    assert b.withheld is not None and "UTF-8" in b.withheld and _sha(b"\xff\xfe\x00") in b.withheld
    os.mkfifo(tmp_path / "fifo")  # opening it for reading would block: never opened
    b = read_before("fifo", str(tmp_path))
    assert b.withheld is not None and "regular" in b.withheld
    b = read_before(str(tmp_path), str(tmp_path))
    assert b.withheld is not None and "regular" in b.withheld


def test_no_cwd_and_a_relative_path_is_unknown() -> None:
    b = read_before("a.txt", "")
    assert not b.known and b.text is None and b.withheld is None
    assert read_before("", "/work").withheld is None
    b = read_before("/work/x\x00y", "/work")
    assert not b.known and b.withheld is not None
