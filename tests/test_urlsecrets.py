"""A URL's own credentials as logs see them (bot.util.urlsecrets): masked in the URL, known to the masker."""

from __future__ import annotations

import pytest

from bot.util.urlsecrets import shown_url, url_secrets


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://u:p%40ss@h.example/x?token=abc&v=1", "https://u:***@h.example/x?token=***&v=***"),
        ("http://127.0.0.1:8080/hook", "http://127.0.0.1:8080/hook"),
        ("http://u@[::1]:9/h#frag", "http://u@[::1]:9/h"),
        ("http://h:notaport/h", "(an unreadable URL)"),
    ],
)
def test_shown_url(url: str, shown: str) -> None:
    assert shown_url(url) == shown


def test_url_secrets_are_the_password_and_secret_looking_values() -> None:
    got = url_secrets("https://u:p%40ss@h/x?access_token=t%2Bk&sig=s1&format=json&apiKey=K")
    assert set(got) == {"p%40ss", "p@ss", "t%2Bk", "t+k", "s1", "K"}
    assert url_secrets("http://h/x") == []


def test_one_rule_for_secret_query_keys() -> None:
    from bot.inbox.db.pgurl import parse_pg
    from bot.util.urlsecrets import secret_key

    for key in ("password", "sslpassword", "PassWord", "token", "access_token", "key", "api_key", "apikey",
                "x-api-key", "sig", "signature", "secret", "auth", "code", "session", "session_id", "pwd", "cred"):
        assert secret_key(key), key
    for key in ("sslkey", "sslmode", "target_session_attrs", "host", "application_name", "monkey", "barcode"):
        assert not secret_key(key), key
    pg = parse_pg("postgresql://u@h/db?target_session_attrs=read-write&sslkey=/k.pem&token=t0ps3cret")
    assert "read-write" not in pg.secrets and "/k.pem" not in pg.secrets and "t0ps3cret" in pg.secrets
    assert "target_session_attrs=read-write" in pg.shown() and "t0ps3cret" not in pg.shown()
