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


def after_a_start(then: str) -> str:
    """The last line ``then`` prints in a process where the console script has started (a config error)."""
    code = (
        "import sys\n"
        "from bot.cli import main as m\n"
        "sys.argv = ['permission-bot', 'run', '--config', '/nonexistent/config.toml']\n"
        "try:\n    m.entry()\nexcept SystemExit:\n    pass\n" + then
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    return r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr


def test_the_console_script_keeps_out_what_structlog_would_import_unused() -> None:
    """rich and twisted come with the test and lint extras; a command's process never imports them."""
    assert after_a_start(
        "import structlog, structlog.dev\n"
        "loaded = sorted(n for n in ('rich', 'twisted') if sys.modules.get(n) is not None)\n"
        "print(loaded, 'structlog.dev' in sys.modules)"
    ) == "[] True"


def test_the_proxy_imports_the_sdk_schema_lean_and_it_still_validates() -> None:
    code = (
        "import sys\n"
        "import bot.acp.proxy\n"
        "from pydantic._internal import _config, _fields\n"
        "from acp.schema import RequestPermissionRequest\n"
        "from bot.acp import messages\nfrom bot.util import lean_models\n"
        "assert _fields.extract_docstrings_from_cls is not lean_models.no_docstrings\n"
        "assert not _config.config_defaults['defer_build']\n"
        "print(RequestPermissionRequest.__pydantic_complete__)\n"
        "r = messages.permission_request({'sessionId': 's', 'toolCall': {'toolCallId': 'c'}, 'options': []})\n"
        "print(r.tool_call.tool_call_id, RequestPermissionRequest.__pydantic_complete__)\n"
        "try:\n    messages.permission_request({'sessionId': 's'})\n"
        "except messages.BadMessage as e:\n    print('bad', e)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    lines = r.stdout.strip().splitlines()
    assert lines[:2] == ["False", "c True"] and lines[2].startswith("bad "), (r.stdout, r.stderr)


def test_the_console_script_keeps_cffi_out_and_nio_ciphers_still_work() -> None:
    """With cffi out, pycryptodome (nio's attachment cipher) uses ctypes: the same library, no parsing."""
    assert after_a_start(
        "from nio.crypto.attachments import encrypt_attachment, decrypt_attachment\n"
        "data, keys = encrypt_attachment(b'attached')\n"
        "plain = decrypt_attachment(data, keys['key']['k'], keys['hashes']['sha256'], keys['iv'])\n"
        "print(plain, 'pycparser' in sys.modules, sys.modules.get('cffi'))"
    ) == "b'attached' False None"
