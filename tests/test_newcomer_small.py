"""Small things a newcomer trips on, each through the real command where one is involved: the top-level help
names every `permissions` verb, the hook's words on bad input and when it gives no decision, nio's stray
validation warning before a login error, a number not offered, and `doctor`'s words about where a secret
came from."""

from __future__ import annotations

import io
import json
import logging
import subprocess
from collections.abc import Callable

from bot.config import ENV_PASSWORD, ENV_RECOVERY_KEY, secret_source
from bot.demo.homeserver import free_port
from tests.support.station import exe_path
from tests.test_log_style import logs_to  # noqa: F401 - fixture


def cli(*args: str, stdin: str = "", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([exe_path(), *args], input=stdin, capture_output=True, text=True, timeout=60, env=env)


def test_the_top_level_help_names_every_permissions_verb() -> None:
    p = cli("--help")
    assert p.returncode == 0
    line = " ".join(p.stdout.split())
    for verb in ("ls", "approve", "deny", "answer", "submit", "watch", "rules"):
        assert f" {verb}," in line or f" {verb} " in line or line.endswith(verb), (verb, line)


def test_bad_hook_input_is_said_in_words_and_claude_code_asks_as_usual() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    env = {"PATH": "/usr/bin:/bin", "PERMISSION_BOT_URL": url, "PERMISSION_BOT_TOKEN": "t"}
    for data, said in (({}, "hook_event_name: missing"), ({"hook_event_name": 5}, "expected a string, got a int")):
        p = cli("hook", "claude-code", stdin=json.dumps(data), env=env)
        assert p.returncode == 0 and "Traceback" not in p.stderr
        err = p.stderr.strip().splitlines()[-1]
        assert said in err and "NoneType" not in err, err
        assert err.endswith("no decision, so Claude Code asks as usual"), err
    p = cli("hook", "codex", stdin="{}", env=env)
    assert p.stderr.strip().splitlines()[-1].endswith("no decision, so Codex asks as usual")


def test_nios_validation_warning_before_an_error_answer_is_debug(logs_to: Callable[..., io.StringIO]) -> None:  # noqa: F811
    sink = logs_to(fmt="json")
    logging.getLogger("nio.responses").warning("Error validating response: 'user_id' is a required property")
    logging.getLogger("nio.responses").warning("something else")
    lines = [json.loads(x) for x in sink.getvalue().splitlines()]
    assert [x["message"] for x in lines if x.get("level") == "warning"] == ["something else"]


def test_a_secret_is_named_by_where_it_came_from() -> None:
    assert secret_source("password", {}) == "matrix.password"
    assert secret_source("password", {ENV_PASSWORD: "x"}) == f"env {ENV_PASSWORD}"
    assert secret_source("recovery_key", {ENV_RECOVERY_KEY: "x"}) == f"env {ENV_RECOVERY_KEY}"
