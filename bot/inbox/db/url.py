"""Where the state lives: ``state.database`` (env ``PERMISSION_BOT_DATABASE_URL`` wins) read into a target.

Accepted: ``sqlite:PATH``, ``sqlite:///ABS/PATH``, a plain path, or ``postgresql://`` / ``postgres://``
URLs as the driver (asyncpg) reads them (:mod:`bot.inbox.db.pgurl`). A bad value is one line naming
``state.database`` (or the variable or flag it came from) and never the password: a URL is shown only as
rebuilt from its parsed parts without any password (:attr:`Target.shown`), driver errors have every
secret of the URL cut out (:func:`scrub`), and :func:`secrets_of` gives them to the log masker.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from bot.inbox.db.pgurl import PgUrlError, lenient_secrets, parse_pg
from bot.util.urlsecrets import secret_key

ENV = "PERMISSION_BOT_DATABASE_URL"
KEY = "state.database"
_PASSWORD_IN_NETLOC = re.compile(r"(//[^/@:\s]*:)\S*@")  # up to the last @ of the word: a password may hold @
_QUERY_PAIR = re.compile(r"((?:^|[?&\s])([^=&?\s]+)=)([^&\s]*)")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


class DatabaseUrlError(ValueError):
    """A ``state.database`` value that names no usable database (the message names the key, no secret)."""


@dataclass(frozen=True)
class Target:
    """One database: ``engine`` is ``sqlite`` (``path`` set) or ``postgresql`` (``dsn`` set)."""

    engine: str
    path: Path | None = None
    dsn: str | None = None  # the URL as given: for the driver only, never shown
    password: str | None = None  # the one the driver uses
    secrets: tuple[str, ...] = ()  # every secret the URL holds (raw and decoded): cut from any message
    hosts: tuple[tuple[str, int | None], ...] = ()  # (host, port or None) as the driver reads them
    url_shown: str = ""  # rebuilt from the parsed parts, without any password
    key: str = KEY  # where the value came from (state.database, the variable, the flag): messages name it

    @property
    def shown(self) -> str:
        """The target as it may be shown or logged."""
        return str(self.path) if self.path is not None else self.url_shown


def mask(text: str) -> str:
    """Free text with any URL password (``user:PASSWORD@``, ``?password=``, ``?pass%77ord=``) as ``***``."""
    def pair(m: re.Match[str]) -> str:
        return m.group(1) + ("***" if secret_key(unquote(m.group(2).replace("+", " "))) else m.group(3))

    return _QUERY_PAIR.sub(pair, _PASSWORD_IN_NETLOC.sub(r"\1***@", text))


def scrub(message: str, target: Target) -> str:
    """A driver's error message with every secret of the target's URL cut out."""
    for secret in sorted({*target.secrets, *([target.password] if target.password else [])}, key=len, reverse=True):
        message = message.replace(secret, "***")
    return mask(message)


def secrets_of(value: str | None) -> list[str]:
    """What the log masker should hide of a database URL (read generously; never raises)."""
    return lenient_secrets(value) if value else []


def parse(value: str, key: str = KEY) -> Target:
    """Read a ``state.database`` value; raise DatabaseUrlError (one line, no password) when it is unusable."""
    value = value.strip()
    if not value:
        raise DatabaseUrlError(f"{key}: empty; give a postgresql:// URL or a SQLite path")
    m = _SCHEME.match(value)
    scheme = m.group(1).lower() if m and len(m.group(1)) > 1 else ""  # "C:\\..." is a path, not a scheme
    if scheme in ("sqlite", "sqlite3"):
        rest = value[m.end():] if m else value
        path = rest[2:] if rest.startswith("//") else rest  # sqlite:///abs -> /abs; sqlite:rel -> rel
        if not path or path == ":memory:":
            raise DatabaseUrlError(f"{key}: a SQLite database needs a file path (sqlite:PATH)")
        return Target("sqlite", path=Path(unquote(path)), key=key)
    if scheme in ("postgres", "postgresql"):
        try:
            url = parse_pg(value)
        except PgUrlError as e:
            raise DatabaseUrlError(f"{key}: not a valid PostgreSQL URL: {e}") from None
        return Target("postgresql", dsn=value, password=url.password, secrets=url.secrets, hosts=url.hosts,
                      url_shown=url.shown(), key=key)
    if scheme:
        raise DatabaseUrlError(f"{key}: unknown kind {scheme[:20]!r} (use postgresql:// or sqlite:)")
    return Target("sqlite", path=Path(value), key=key)


def resolve(configured: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """The database URL in force: the environment's ``PERMISSION_BOT_DATABASE_URL`` wins over the config."""
    env = os.environ if env is None else env
    return env.get(ENV) or configured or None


def source_key() -> str:
    """What a message about the database URL in force names: the variable when it is set, else the key."""
    return f"{KEY} (env {ENV})" if os.environ.get(ENV) else KEY


def session_attrs(target: Target) -> str | None:
    """The ``target_session_attrs`` to connect with: the URL's own, else ``read-write`` when it
    names several hosts (after a fail-over only the promoted primary takes writes), else None (the driver's)."""
    own = next((v for name, v in parse_qsl(urlsplit(target.dsn or "").query) if name == "target_session_attrs"), None)
    return own or ("read-write" if len(target.hosts) > 1 else None)
