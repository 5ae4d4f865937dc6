"""Config: the example parses, env wins for secrets, errors are one line naming the key."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from bot.config import ConfigError, load_config, parse_config
from bot.util.durations import DurationError, parse_duration

ROOT = Path(__file__).resolve().parents[1]
MIN = {"matrix": {"homeserver": "http://hs", "user_id": "@b:hs", "room": "!r:hs", "password": "file-pw"}}


def test_example_config_is_valid() -> None:
    cfg = parse_config(tomllib.loads((ROOT / "config.example.toml").read_text()), env={})
    assert cfg.api.listen == "127.0.0.1:8750" and cfg.prompts.timeout == 900.0


def test_env_secrets_win_and_never_show_in_repr() -> None:
    env = {"PERMISSION_BOT_MATRIX_PASSWORD": "env-pw-1234", "PERMISSION_BOT_API_TOKEN": "env-token-5678"}
    cfg = parse_config({**MIN, "api": {"token": "file-token"}}, env=env)
    assert cfg.matrix.password == "env-pw-1234" and cfg.api.token == "env-token-5678"
    assert "env-pw-1234" not in repr(cfg) and "env-token-5678" not in repr(cfg)


def test_access_token_instead_of_password() -> None:
    m = {k: v for k, v in MIN["matrix"].items() if k != "password"}
    cfg = parse_config({"matrix": m}, env={"PERMISSION_BOT_MATRIX_ACCESS_TOKEN": "syt_x"})
    assert cfg.matrix.access_token == "syt_x"
    with pytest.raises(ConfigError, match=r"^matrix\.password: required"):
        parse_config({"matrix": m}, env={})


def test_a_typo_in_a_required_key_is_said_beside_it_and_all_errors_come_at_once() -> None:
    m = {k: v for k, v in MIN["matrix"].items() if k != "homeserver"}
    with pytest.raises(ConfigError) as e:
        parse_config({"matrix": {**m, "homserver": "http://hs"}, "api": {"listen": "8750"}, "log": {"level": "x"}},
                     env={})
    msg = str(e.value)
    assert "matrix.homeserver: required" in msg and "matrix.homserver: unknown key (did you mean homeserver?)" in msg
    assert "api.listen:" in msg and "log.level:" in msg and "\n" not in msg and "http://hs" not in msg


@pytest.mark.parametrize(
    ("patch", "key"),
    [
        ({"answerers": {"users": "@a:hs"}}, "answerers.users"),
        ({"answerers": {"min_power_level": 5.5}}, "answerers.min_power_level"),
        ({"api": {"listen": "8750"}}, "api.listen"),
        ({"prompts": {"timeout": "0s"}}, "prompts.timeout"),
        ({"state": {"path": 3}}, "state.path"),
        ({"log": {"level": "loud"}}, "log.level"),
        ({"webhooks": [{"url": "ftp://x"}]}, "webhooks.0.url"),
        ({"extra": 1}, "extra: unknown key"),
    ],
)
def test_errors_name_the_key(patch: dict, key: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config({**MIN, **patch}, env={})
    msg = str(e.value)
    assert msg.startswith(key) and "\n" not in msg


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"[matrix\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("5m", 300), ("1h30m", 5400), ("250ms", 0.25),
                                               ("2", 2), (" 1h ", 3600), (15, 15)])
def test_durations(text: str | int, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "5x", "-1s", "m5", "1h 2", True])
def test_bad_durations(text: object) -> None:
    with pytest.raises(DurationError):
        parse_duration(text)  # type: ignore[arg-type]


def test_trust_modes_and_the_recovery_key() -> None:
    cfg = parse_config(MIN, env={"PERMISSION_BOT_MATRIX_RECOVERY_KEY": "EsTc abcd-secret"})
    assert cfg.matrix.trust == "cross-signed" and cfg.matrix.recovery_key == "EsTc abcd-secret"
    assert "abcd-secret" not in repr(cfg)
    assert parse_config({"matrix": {**MIN["matrix"], "trust": "tofu"}}, env={}).matrix.trust == "tofu"
    with pytest.raises(ConfigError) as e:
        parse_config({"matrix": {**MIN["matrix"], "trust": "everyone", "recovery_key": "EsTc secret-x"}}, env={})
    assert str(e.value).startswith("matrix.trust") and "secret-x" not in str(e.value)


def test_one_grammar_for_durations_and_ages() -> None:
    from bot.util.durations import parse_duration, parse_since

    assert parse_duration("2w") == 2 * 604800 and parse_duration("1h30m") == 5400 and parse_duration("250ms") == 0.25
    now = 1_000_000_000.0
    assert parse_since("2h", now) == now - 7200 and parse_since("7d", now) == now - 7 * 86400
    assert parse_since("1w", now) == now - 604800 and parse_since("90s", now) == now - 90
    assert parse_since("2026-01-02T03:04:05Z", now) == parse_since("2026-01-02T03:04:05", now)
    for bad in ("5", "yesterday", "", "2x"):
        with pytest.raises(ValueError, match="ISO 8601"):
            parse_since(bad, now)
