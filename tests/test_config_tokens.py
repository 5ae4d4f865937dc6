"""[[api.tokens]]: named tokens with roles; every error one line naming the key, never a secret."""

from __future__ import annotations

from typing import Any

import pytest

from bot.config import ConfigError, parse_config

MIN = {"matrix": {"homeserver": "http://hs", "user_id": "@b:hs", "room": "!r:hs", "password": "file-pw"}}
S1, S2 = "first-secret-abcdef-0123", "second-secret-abcdef-0123"


def _err(data: dict[str, Any], env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as e:
        parse_config(data, env=env or {})
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_named_tokens_with_secret_or_secret_env() -> None:
    api = {"tokens": [{"name": "laptop", "role": "agent", "secret": S1},
                      {"name": "alice-cli", "role": "decider", "secret_env": "ALICE"}]}
    cfg = parse_config({**MIN, "api": api}, env={"ALICE": S2})
    got = [(t.name, t.role, t.secret) for t in cfg.api.tokens]
    assert got == [("laptop", "agent", S1), ("alice-cli", "decider", S2)]
    assert S1 not in repr(cfg) and S2 not in repr(cfg)
    assert cfg.api.token is None
    owned = parse_config({**MIN, "api": {"tokens": [{**api["tokens"][1], "user": "@alice:example.org"}]}},
                         env={"ALICE": S2})
    assert owned.api.tokens[0].user == "@alice:example.org"


@pytest.mark.parametrize(
    ("tokens", "env", "start"),
    [
        ([{"name": "a", "role": "agent"}], {}, "api.tokens.0: secret or secret_env"),
        ([{"name": "a", "role": "agent", "secret_env": "NOPE"}], {},
         "api.tokens.0.secret_env: environment variable NOPE"),
        ([{"name": "a", "role": "agent", "secret_env": "V", "secret": S1}], {"V": S2}, "api.tokens.0: set secret or"),
        ([{"name": "a", "role": "boss", "secret": S1}], {}, "api.tokens.0.role:"),
        ([{"name": "a/b", "role": "agent", "secret": S1}], {}, "api.tokens.0.name:"),
        ([{"role": "agent", "secret": S1}], {}, "api.tokens.0.name: required"),
        ([{"name": "a", "role": "agent", "secret": "short-secret"}], {}, "api.tokens.0.secret: at least 16"),
        ([{"name": "a", "role": "agent", "secret": S1}, {"name": "a", "role": "decider", "secret": S2}], {},
         "api.tokens.1.name: repeats"),
        ([{"name": "a", "role": "agent", "secret": S1}, {"name": "b", "role": "decider", "secret": S1}], {},
         "api.tokens.1.secret: the same secret"),
        ([{"name": "a", "role": "agent", "secret": 1234567890123456789}], {}, "api.tokens.0.secret: expected a string"),
        ([{"name": "a", "role": "agent", "secret": S1, "extra": 1}], {}, "api.tokens.0.extra: unknown key"),
        ([{"name": "a", "role": "decider", "secret": S1, "user": "alice"}], {}, "api.tokens.0.user: must be a Matrix"),
        ([{"name": "a", "role": "decider", "secret": S1, "user": "@alice"}], {}, "api.tokens.0.user: must be a Matrix"),
        ([{"name": "a", "role": "decider", "secret": S1, "user": "@al ice:x"}], {}, "api.tokens.0.user: must be"),
        ([{"name": "a", "role": "decider", "secret": S1, "user": 7}], {}, "api.tokens.0.user: expected a string"),
        ([{"name": "a", "role": "agent", "secret": S1, "user": "@alice:x"}], {}, "api.tokens.0: user: only a decider"),
    ],
)
def test_token_errors_name_the_key_and_hide_the_secret(tokens: list[Any], env: dict[str, str], start: str) -> None:
    msg = _err({**MIN, "api": {"tokens": tokens}}, env)
    assert msg.startswith(start), msg
    for secret in (S1, S2, "short-secret", "1234567890123456789"):
        assert secret not in msg


def test_legacy_token_may_not_share_a_named_secret() -> None:
    msg = _err({**MIN, "api": {"token": S1, "tokens": [{"name": "a", "role": "agent", "secret": S1}]}})
    assert msg.startswith("api.tokens.0.secret: the same secret") and S1 not in msg


@pytest.mark.parametrize("key", ["password", "access_token"])
def test_a_secret_typed_as_a_number_is_not_echoed(key: str) -> None:
    m = {**MIN["matrix"], key: 918273645546372819}
    msg = _err({"matrix": m})
    assert msg == f"matrix.{key}: expected a string (got an integer)"
    assert "918273645546372819" not in msg


def test_no_value_of_any_type_error_is_echoed() -> None:
    msg = _err({**MIN, "api": {"token": ["hunter2-secret"]}})
    assert msg == "api.token: expected a string (got a list)"
    msg = _err({**MIN, "webhooks": [{"url": "http://x", "secret": 7777777}]})
    assert msg.startswith("webhooks.0.secret:") and "7777777" not in msg
